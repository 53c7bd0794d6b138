"""第 13b 课：阶段组装 —— Lesson 13b: stage assembly, MiniMind's block and model.

Lessons 10–13 built the pieces; here they are wired together as MiniMind's
model_minimind.py does. Fill in the three graded forwards:

  self_attn  Attention.forward: q/k/v projections, heads and grouped-query kv heads,
             the q/k norms, RoPE on q and k, the KV cache (new keys after the cached
             ones, on the sequence dimension), the masks, and o_proj
  block      MiniMindBlock.forward: pre-norm, attention, residual, pre-norm, the FFN
             (FeedForward or MOEFeedForward), residual
  model      CourseMiniMindForCausalLM.forward: embeddings, the RoPE rows of the new
             tokens (they start at the cache's length), the blocks, the final norm,
             lm_head; the logits, each layer's cache and the sum of every MoE layer's
             aux loss

The pieces come from `model_parts` (your lessons 10–13; when graded, the grader's
own pieces stand in for them so that only the wiring counts here). Shapes follow
MiniMind: hidden states [B, S, H]; q [B, S, n_heads, head_dim]; k and v
[B, S, n_kv_heads, head_dim]; a layer's cache is (k, v), each [B, past + S,
n_kv_heads, head_dim]; the padding mask [B, past + S] has 1 for a real token.
Check your work with `grader check 13b_assembly.py`.
"""
import math
import torch
import torch.nn.functional as F
from torch import nn

from model_parts import (FeedForward, MOEFeedForward, RMSNorm, apply_rotary_pos_emb,
                         precompute_freqs_cis, repeat_kv, rope_position_embeddings)


class AssemblyConfig:
    """MiniMindConfig's fields that the block and the model read (given): the defaults
    below, any of them changed by a keyword argument."""
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    vocab_size: int = 128
    max_position_embeddings: int = 256
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e6
    intermediate_size: int = 192
    hidden_act: str = "silu"
    use_moe: bool = False
    num_experts: int = 4
    num_experts_per_tok: int = 1
    norm_topk_prob: bool = True
    router_aux_loss_coef: float = 5e-4

    def __init__(self, **changed):
        for name, value in changed.items():
            if not hasattr(AssemblyConfig, name):
                raise TypeError(f"AssemblyConfig has no field {name}")
            setattr(self, name, value)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


class Attention(nn.Module):
    """MiniMind's Attention (part "self_attn"): [B, S, H] -> ([B, S, H], cache)."""

    def __init__(self, config: AssemblyConfig):
        super().__init__()
        self.n_local_heads = config.num_attention_heads
        self.n_local_kv_heads = config.num_key_value_heads
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = config.head_dim
        self.q_proj = nn.Linear(config.hidden_size, self.n_local_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.n_local_kv_heads * self.head_dim,
                                bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.n_local_kv_heads * self.head_dim,
                                bias=False)
        self.o_proj = nn.Linear(self.n_local_heads * self.head_dim, config.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def forward(self, x: torch.Tensor, position_embeddings: tuple,
                past_key_value: tuple = None, use_cache: bool = False,
                attention_mask: torch.Tensor = None) -> tuple:
        """(output [B, S, H], (k, v) when use_cache else None)."""
        # YOUR CODE HERE
        raise NotImplementedError()


class MiniMindBlock(nn.Module):
    """One decoder layer (part "block"): ([B, S, H], cache) out."""

    def __init__(self, layer_id: int, config: AssemblyConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        if config.use_moe:
            self.mlp = MOEFeedForward(config.hidden_size, config.intermediate_size,
                                      config.num_experts, config.num_experts_per_tok,
                                      config.hidden_act, config.norm_topk_prob,
                                      config.router_aux_loss_coef)
        else:
            self.mlp = FeedForward(config.hidden_size, config.intermediate_size,
                                   config.hidden_act)

    def forward(self, hidden_states: torch.Tensor, position_embeddings: tuple,
                past_key_value: tuple = None, use_cache: bool = False,
                attention_mask: torch.Tensor = None) -> tuple:
        # YOUR CODE HERE
        raise NotImplementedError()


class CourseMiniMindForCausalLM(nn.Module):
    """MiniMindModel and its lm_head (part "model"): (logits, caches, aux_loss)."""

    def __init__(self, config: AssemblyConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([MiniMindBlock(i, config)
                                     for i in range(config.num_hidden_layers)])
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        freqs_cos, freqs_sin = precompute_freqs_cis(config.head_dim,
                                                    config.max_position_embeddings,
                                                    config.rope_theta)
        self.register_buffer("freqs_cos", freqs_cos, persistent=False)
        self.register_buffer("freqs_sin", freqs_sin, persistent=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor = None,
                past_key_values: list = None, use_cache: bool = False) -> tuple:
        """(logits [B, S, vocab], a list of each layer's cache, the summed aux loss)."""
        # YOUR CODE HERE
        raise NotImplementedError()


# ----------------------------------------------------------------------------
# Check questions. Answer each in its string, in English or Chinese; leave the
# code above as it is. A TA marks the written answers; the shapes question is
# marked by the grader (`grader check` shows it).
# 本节检查：在下面的字符串里作答（中英文均可）。
# ----------------------------------------------------------------------------

# q1 (2 points): Why does the model return the sum of every MoE layer's aux loss, not the last layer's or their mean? Where does that sum go in training?
# q1（2 分）：为什么模型返回的是所有 MoE 层 aux loss 的和，而不是最后一层的或它们的平均？训练时这个和去了哪里？
ANSWER_Q1 = """YOUR ANSWER HERE"""

# q2 (1.25 points): The model is given input_ids.shape = [B, S] and a cache of P earlier positions. Write the shapes of hidden_states (after embed_tokens), xq (after its view), xk (after the cache, before repeat_kv), scores and logits.
# q2（1.25 分）：模型的输入 `input_ids.shape = [B, S]`，缓存里已有 P 个更早的位置。写出 `hidden_states`（embed_tokens 之后）、`xq`（view 之后）、`xk`（拼上缓存之后、repeat_kv 之前）、`scores` 和 `logits` 的形状。
ANSWER_Q2 = {
    "hidden_states": "",
    "xq": "",
    "xk": "",
    "scores": "",
    "logits": "",
}
