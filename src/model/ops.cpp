#include "model/ops.h"

#include "core/error.h"

namespace qwenrt {

const char* part_name(Part p) {
  switch (p) {
    case Part::Residual: return "residual";
    case Part::Norm: return "rms norm";
    case Part::DeltaNetInProj: return "deltanet in_proj";
    case Part::DeltaNet: return "deltanet";
    case Part::DeltaNetOutProj: return "deltanet out_proj";
    case Part::AttentionInProj: return "attention q/gate/k/v";
    case Part::Attention: return "attention";
    case Part::AttentionOutProj: return "attention o_proj";
    case Part::GateUp: return "gate/up";
    case Part::SwiGlu: return "swiglu";
    case Part::Down: return "down";
    case Part::Moe: return "moe";
    case Part::FinalNorm: return "final norm";
    case Part::LmHead: return "lm_head";
    case Part::MtpEmbeddingNorm: return "mtp embedding norm";
    case Part::MtpHiddenNorm: return "mtp hidden norm";
    case Part::MtpConcat: return "mtp concat";
    case Part::HiddenRows: return "hidden rows";
    case Part::MtpFc: return "mtp fc";
    case Part::kCount: break;
  }
  return "?";
}

Act Ops::given_hidden() { fail("this backend does not run the MTP block yet (given_hidden)"); }
Act Ops::concat(Part, const Act&, const Act&) { fail("this backend does not run the MTP block yet (concat)"); }

std::vector<Act> Ops::norm_matmul(Part part, const Act& h, const ParamVector& w, std::initializer_list<const Weight*> weights) {
  return matmul(part, rms_norm(Part::Norm, h, w), weights);
}

void Ops::matmul_add(Part part, const Act& x, const Weight& w, Act& h) { add(h, matmul(part, x, {&w})[0]); }

void Ops::moe_add(const MoeWeights& w, const Act& x, Act& h) { add(h, moe(w, x)); }

void Ops::norm_moe_add(const ParamVector& w, const MoeWeights& moe, Act& h) { moe_add(moe, rms_norm(Part::Norm, h, w), h); }

Act Ops::norm_gate_up_swiglu(const Act& h, const ParamVector& w, const Weight& gate, const Weight& up) {
  const std::vector<Act> gu = matmul(Part::GateUp, rms_norm(Part::Norm, h, w), {&gate, &up});
  return swiglu(gu[0], gu[1]);
}

}  // namespace qwenrt
