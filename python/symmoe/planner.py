"""The planner from Python: `plan(...)` returns the launch plans `symmoe plan` prints, as objects with attributes.

    p = symmoe.plan("v3", ranks=8, tokens=4096)
    p.mega.block_m, p.ep.dispatch_sms, p.l1.num_stages
    print(p)            # every plan, one per block, as the CLI prints them

    h = symmoe.plan("v3", ranks=64, tokens=4096, nodes=8)   # the hybrid (scale-out) plan, as `symmoe plan --nodes`
    h.dispatch_us, h.dispatch_rdma_bytes, h.scaleup_recv_bytes
    print(h); print(h.sweep())                              # EP16-EP256 next to DeepEP's published numbers
SYMMOE_* overrides (SYMMOE_BLOCK_M, SYMMOE_NUM_STAGES, SYMMOE_EP_SMS, SYMMOE_EXPERTS_PER_WAVE) apply, as in the CLI.
"""
from . import _C

DEFAULT_NUM_SMS = _C.DEFAULT_NUM_SMS


class Plans:
    """The plans of one deployment: ep (dispatch/combine), l1 / l2 (grouped GEMMs of the composed path), mega (the
    fused layer; None where its kernel cannot run the shape, mega_problem then says why, e.g. mixtral-8x7b's
    intermediate 14336 past the fused kernel's 8192)."""

    def __init__(self, shape, ep, l1, l2, mega, mega_problem=None):
        self.shape, self.ep, self.l1, self.l2, self.mega = shape, ep, l1, l2, mega
        self.mega_problem = mega_problem

    def validate(self):
        for p in (self.ep, self.l1, self.l2, self.mega):
            if p is not None:
                p.validate()

    def __str__(self):
        def block(title, plan):
            return title + "\n    " + str(plan).replace(" | ", "\n    ")
        return "\n".join([
            f"symmoe plan: {self.shape}",
            block("EP dispatch/combine:", self.ep),
            block("Grouped GEMM L1 (SwiGLU + FP8 epilogue):", self.l1),
            block("Grouped GEMM L2 (bf16 out):", self.l2),
            block("MegaMoE (fused layer):", self.mega) if self.mega is not None else
            f"MegaMoE (fused layer):\n    not available for this shape: {self.mega_problem}",
        ])

    __repr__ = __str__


def plan(shape="v3", ranks=8, tokens=4096, num_sms=DEFAULT_NUM_SMS, dispatch_dtype="fp8", nodes=None,
         node_limit=0):
    """Plans for a named shape (symmoe.named_shape's: flash, pro, v3, tiny, qwen3-30b-a3b, qwen3-235b-a22b,
    mixtral-8x7b) or a MoeShape of any dimensions (its ranks and tokens are used).

    With nodes=N: the hybrid (scale-out) plan instead, a HybridPlan (N nodes of ranks / N GPUs; node_limit = max
    distinct nodes per token, 0 = none): buffer sizes per rank, RDMA / NVLink bytes per call, time estimates.
    """
    if nodes is not None:
        if isinstance(shape, str):
            return _C.plan_hybrid(shape, ranks, tokens, nodes, dispatch_dtype, node_limit)
        if isinstance(shape, _C.MoeShape):
            return _C.plan_hybrid(shape, nodes, dispatch_dtype, node_limit)
        raise TypeError(f"shape must be a name or a symmoe.MoeShape, got {type(shape).__name__}")
    if node_limit:
        raise ValueError("node_limit needs nodes")
    if isinstance(shape, str):
        shape = _C.named_shape(shape, ranks, tokens)
    elif not isinstance(shape, _C.MoeShape):
        raise TypeError(f"shape must be a name or a symmoe.MoeShape, got {type(shape).__name__}")
    m = _C.expected_tokens_per_expert(shape, shape.num_max_tokens_per_rank)
    ep = _C.plan_ep(shape, dispatch_dtype, num_sms)
    l1 = _C.plan_grouped_gemm(m, 2 * shape.intermediate, shape.hidden, shape.num_local_experts, num_sms,
                              "swiglu_fp8")
    l2 = _C.plan_grouped_gemm(m, shape.hidden, shape.intermediate, shape.num_local_experts, num_sms, "bf16")
    try:
        _C.mega_check_shape(shape, num_sms)  # the fused kernel's limits (hidden, intermediate, top-k)
    except _C.Error as e:
        return Plans(shape, ep, l1, l2, None, str(e))
    return Plans(shape, ep, l1, l2, _C.plan_mega_moe(shape, num_sms))
