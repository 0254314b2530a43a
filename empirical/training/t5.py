"""T5 as a causal LM: the decoder stack of :mod:`transformers`' T5 without its cross-attention.

The paper's √t curve is T5-base's (§5, Figure 2). ``normsat train --arch t5`` trains the closest
miniature: T5's decoder blocks with every T5 ingredient kept (pre-norm RMSNorm without mean
subtraction or bias, no bias in any linear map, the ReLU feed-forward of the original T5, the
relative position bias of the first layer shared by all layers, tied embeddings with the logits
rescaled by d_model^-1/2, T5's initialization). What differs from T5-base is structural only:
there is no encoder, so each block keeps its causal self-attention and feed-forward and drops the
cross-attention (which would see no encoder states and hold never-trained parameters in ‖θ‖).
"""

from __future__ import annotations

from typing import cast

import torch
import transformers
from torch import nn
from torch.nn import functional as F
from transformers.modeling_outputs import CausalLMOutput
from transformers.models.t5.modeling_t5 import T5Stack

__all__ = ["T5DecoderLM", "t5_decoder_config"]


def t5_decoder_config(vocab_size: int, width: int, layers: int, heads: int,
                      pad_id: int) -> transformers.T5Config:
    """A T5 configuration for a causal decoder: T5-base's proportions (d_ff = 4·d_model), no dropout."""
    config = transformers.T5Config(
        vocab_size=vocab_size, d_model=width, d_kv=width // heads, d_ff=4 * width, num_layers=layers,
        num_heads=heads, dropout_rate=0.0, feed_forward_proj="relu", is_decoder=True,
        is_encoder_decoder=False, use_cache=False, pad_token_id=pad_id, eos_token_id=pad_id,
    )
    config._attn_implementation = "eager"  # the plain softmax the degree and limit rules trace
    return config


class T5DecoderLM(nn.Module):
    """T5's decoder stack without cross-attention, answering like a Hugging Face causal LM.

    Its ``hidden_states`` are T5's: the embeddings, then each block's output, the last one after
    the final RMSNorm.

    >>> model = T5DecoderLM(t5_decoder_config(vocab_size=11, width=8, layers=1, heads=2, pad_id=0))
    >>> ids = torch.tensor([[1, 2, 3]])
    >>> changed = torch.tensor([[1, 2, 4]])  # only the last token differs
    >>> torch.allclose(model(ids).logits[:, :2], model(changed).logits[:, :2])  # causal
    True
    >>> sorted({type(sub).__name__ for block in model.transformer.block for sub in block.layer})
    ['T5LayerFF', 'T5LayerSelfAttention']
    """

    def __init__(self, config: transformers.T5Config) -> None:
        super().__init__()
        self.config = config
        self.transformer = T5Stack(config)
        for block in self.transformer.block:
            sublayers = cast(nn.ModuleList, block.layer)
            block.layer = nn.ModuleList([sublayers[0], sublayers[-1]])  # self-attention, feed-forward

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                output_hidden_states: bool = False, return_dict: bool = True) -> CausalLMOutput:
        stack = self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                 output_hidden_states=output_hidden_states, use_cache=False)
        # T5's tied head: the last state scaled by d_model^-1/2 against the embedding matrix.
        scaled = stack.last_hidden_state * self.config.d_model ** -0.5
        logits = F.linear(scaled, self.transformer.embed_tokens.weight)
        return CausalLMOutput(logits=logits,
                              hidden_states=stack.hidden_states if output_hidden_states else None)
