# Test data unpacked into the build tree. The Qwen3 tokenizer.json (11 MB) is committed as
# tests/data/tokenizer/qwen3/tokenizer.json.tar.xz (1.4 MB), so that the tracked tree stays small
# enough to travel to the GPU machine (64 MiB with the build); tests and fuzz targets read
# tests/data/tokenizer through QWENRT_TOKENIZER_DATA_DIR, a copy with it unpacked.
set(QWENRT_TOKENIZER_DATA_DIR ${CMAKE_BINARY_DIR}/test_data/tokenizer)
set(qwenrt_qwen3_tokenizer_archive ${CMAKE_SOURCE_DIR}/tests/data/tokenizer/qwen3/tokenizer.json.tar.xz)
file(COPY ${CMAKE_SOURCE_DIR}/tests/data/tokenizer/ DESTINATION ${QWENRT_TOKENIZER_DATA_DIR} PATTERN "*.tar.xz" EXCLUDE)
file(ARCHIVE_EXTRACT INPUT ${qwenrt_qwen3_tokenizer_archive} DESTINATION ${QWENRT_TOKENIZER_DATA_DIR}/qwen3)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${qwenrt_qwen3_tokenizer_archive})
