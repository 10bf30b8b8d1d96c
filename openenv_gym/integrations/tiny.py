"""A tiny offline chat model: smoke runs and tests of LLM loops on CPU, no hub, no download.

The tokenizer is a byte-level BPE trained here on a few lines of chat and game text, with
Qwen's chat markers as special tokens and the tool tags as plain added tokens (special
tokens are dropped on decode, and TRL's tool-call parser must see the tags). Its chat
template is TRL's own Qwen2.5 copy, so TRL recognises it: it attaches the Qwen tool-call
parser and a prefix-preserving training template. The model is a 2-layer Qwen2 with
random weights (it writes nonsense: enough to exercise every code path).

    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer)
    config = cpu_grpo_config("out/")    # a GRPOConfig that trains on 2 CPU cores

Needs the ``trl`` extra (transformers, tokenizers, torch, trl).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["cpu_grpo_config", "tiny_model", "tiny_tokenizer"]

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TAGS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


def _corpus() -> list[str]:
    call = {"name": "guess", "arguments": {"word": "crane"}}
    lines = [
        "You are a helpful assistant. Play the game with the tools you are given.",
        "You may call one or more functions to assist with the user query.",
        "You are provided with function signatures within <tools></tools> XML tags:",
        json.dumps(call),
        "Guess the secret five-letter word of the Wordle game. Feedback: G Y X",
        "You submitted [crane]. Feedback: C R A N E X X G X Y. You have 5 guesses left.",
        "Move the paddle left, stay or right to catch the ball. The episode is over.",
        "Send a message to the echo environment, which echoes it back.",
    ]
    return lines * 16


def tiny_tokenizer() -> Any:
    """The tokenizer: byte-level BPE trained on the spot, Qwen2.5 chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen2_5_chat_template

    core = Tokenizer(models.BPE(unk_token=None))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(
        _corpus(),
        trainers.BpeTrainer(
            vocab_size=700,
            special_tokens=SPECIAL,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
    )
    tokenizer.add_tokens(TOOL_TAGS, special_tokens=False)
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def tiny_model(tokenizer: Any, seed: int = 0) -> Any:
    """A 2-layer Qwen2 causal LM (about 35k parameters) with random weights."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def cpu_grpo_config(output_dir: str, **overrides: Any) -> Any:
    """A GRPOConfig for a 2-core CPU box: fp32, no checkpointing, no logging backends."""
    from trl import GRPOConfig

    kwargs = {
        "output_dir": output_dir,
        "per_device_train_batch_size": 4,
        "num_generations": 2,
        "max_completion_length": 64,
        "max_steps": 2,
        "learning_rate": 1e-2,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "bf16": False,
        "use_cpu": True,
        "dataloader_num_workers": 0,
        "seed": 0,
    }
    # on by default in GRPOConfig; renamed activation_checkpointing in transformers 5.2x
    fields = getattr(GRPOConfig, "__dataclass_fields__", {})
    if "activation_checkpointing" in fields:
        kwargs["activation_checkpointing"] = False
    else:
        kwargs["gradient_checkpointing"] = False
    kwargs.update(overrides)
    return GRPOConfig(**kwargs)
