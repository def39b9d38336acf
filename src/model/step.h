#pragma once
// One forward call: a ragged batch of sequences, each adding some new token rows, flattened into
// one row matrix. The caller names the phase; blocks never guess it from shapes.
#include <cstdint>
#include <vector>

namespace qwenrt {

enum class Phase {
  Decode,     // exactly one new row per sequence
  Window,     // several rows per sequence (prompt chunks); DeltaNet runs the chunked form
  Committed,  // several rows whose results equal appending them one at a time (token-by-token form)
};

struct StepSequence {
  int slot = 0;                 // cache slot; rows continue at the slot's current length
  std::vector<int32_t> tokens;  // one per new row
  // Rows whose input is given rather than looked up (vision features, MTP inputs): their indices
  // into `tokens`, ascending, and their rows [embedding_rows.size(), hidden] in f32. Such a row's
  // token id is not read for its embedding.
  std::vector<int32_t> embedding_rows{};
  std::vector<float> embeddings{};
  // Decode steps queued through engine/StepQueue only: >= 0 makes the sequence's one token the
  // pick of that row of the step queued just before (its `tokens` entry is then not read), so the
  // step can be queued before the host has seen that pick.
  int32_t from_previous = -1;
  // MTP steps only (Qwen35Model::mtp_forward): per row, the main model's final hidden row [H] that
  // the MTP block reads beside the embedding of the row's token; [tokens.size(), hidden] in f32.
  std::vector<float> hidden_in{};
};

struct Step {
  Phase phase = Phase::Decode;
  std::vector<StepSequence> sequences;
  bool all_logits = false;  // logits for every row, else only each sequence's last row
  bool hidden = false;      // also return the final hidden rows of those rows (what the head reads; MTP's input)
  // Return the final hidden row of every row, the logits only of the rows all_logits names (the
  // MTP block's input over a prompt, without [rows, V] logits nobody reads). Implies hidden.
  bool hidden_all = false;
};

// What a step returns for its wanted rows (every row, or each sequence's last), in step order.
struct StepOutput {
  std::vector<float> logits;  // [rows, vocab]
  std::vector<float> hidden;  // [rows, hidden] after the final norm, when Step::hidden (every row's with hidden_all)
};

// Where each sequence's rows sit in the flattened matrix, and each row's position.
struct RowLayout {
  struct Span {
    int slot;
    int64_t first_row, rows, start_position;
  };
  Phase phase;
  std::vector<Span> spans;
  std::vector<int64_t> positions;   // per row
  std::vector<int64_t> logit_rows;  // the rows whose logits (and hidden rows) the step returns
  int64_t total_rows = 0;
  bool given_embeddings = false;  // some row's input is given (StepSequence::embeddings)
  bool hidden_all = false;        // Step::hidden_all: the hidden rows are every row, not the logit rows
};

}  // namespace qwenrt
