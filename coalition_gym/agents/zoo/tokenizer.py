"""The zoo's character vocabulary, tokenizer and chat template (what training and serving share)."""

from __future__ import annotations

from typing import Any, Sequence

from ...types import Message

ZOO_FORMAT_VERSION = 4  # 4: reasoning-gym splits no longer overlap

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
CHARS = ("\n",) + tuple(chr(c) for c in range(32, 127))

#: Renders a chat the way the zoo models were trained (mirrored by :func:`render_chat`).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}{{ ' ' + (m['content'] | trim) + '\n' }}"
    "{% elif m['role'] == 'system' %}{{ (m['content'] | trim) + '\n' }}"
    "{% else %}{{ m['content'] }}{% endif %}{% endfor %}"
)


def render_chat(messages: Sequence[Message]) -> str:
    """Python twin of :data:`CHAT_TEMPLATE` (without BOS), used to build training text fast."""
    parts = []
    for m in messages:
        if m.role == "assistant":
            parts.append(" " + m.content.strip() + "\n")
        elif m.role == "system":
            parts.append(m.content.strip() + "\n")
        else:
            parts.append(m.content)
    return "".join(parts)


def char_tokenizer(context: int = 512) -> Any:
    """A character-level fast tokenizer (printable ASCII and newline; anything else is ``<unk>``) with
    pad, BOS and EOS tokens and the zoo chat template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + CHARS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(list(SPECIALS))
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                  unk_token=UNK, model_max_length=context, padding_side="left")
    tok.chat_template = CHAT_TEMPLATE
    return tok


_VOCAB = {tok: i for i, tok in enumerate(SPECIALS + CHARS)}


def encode_chars(text: str) -> list[int]:
    unk = _VOCAB[UNK]
    return [_VOCAB.get(ch, unk) for ch in text]


