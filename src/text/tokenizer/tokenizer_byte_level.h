// The GPT-2 "ByteLevel" alphabet: every byte is shown as one printable code point so that
// vocab files can store byte strings as JSON text. Printable bytes 0x21-0x7E, 0xA1-0xAC and
// 0xAE-0xFF stand for themselves; the other 68 bytes map, in increasing order, to U+0100... .
// The engine converts vocab entries to raw bytes once at load time and then works on bytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace qwenrt::text::byte_level {

// The code point that stands for `byte`.
char32_t byte_to_code_point(unsigned char byte);

// The byte that `cp` stands for, or nullopt if cp is not in the alphabet.
std::optional<unsigned char> code_point_to_byte(char32_t cp);

// A vocab string in the ByteLevel alphabet (valid UTF-8) -> raw bytes; nullopt if any
// character is outside the alphabet.
std::optional<std::string> decode_token(std::string_view alphabet_text);

}  // namespace qwenrt::text::byte_level
