"""Model pairs for scripts/bench.py: each family built by the core and by transformers, same shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import transformers
from torch import Tensor, nn
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    T5Config,
    T5ForConditionalGeneration,
    ViTConfig,
    ViTForImageClassification,
)

from tetraformer.accel.linear_cross_entropy import lm_loss
from tetraformer.core import (
    CausalLM,
    ImageEncoder,
    Seq2SeqLM,
    SequenceClassifier,
    TextEncoder,
    TransformerConfig,
    flops_per_token,
)

TEXT_BATCH, SEQ_LEN, IMAGE_BATCH = 16, 128, 64
SHAPE = dict(d_model=256, n_layers=4, n_heads=4, d_ff=1024)  # every family's stack
VOCAB = 8192
HF_ATTENTION = "sdpa"  # transformers' default where a model supports it; all four do

Batch = dict[str, Tensor]
LossFn = Callable[[nn.Module, Batch], Tensor]


@dataclass
class Pair:
    """One family: our model, the HF model of the same shape, a batch and how to score it."""

    family: str
    ours: nn.Module
    hf: nn.Module
    batch: Batch
    ours_loss: LossFn
    hf_loss: LossFn
    flops_per_step: float  # training FLOPs (forward + backward) of one step, same count for both sides
    items_per_step: int
    unit: str  # what items_per_step counts: "tok" (tokens) or "img" (images)


# --- models ----------------------------------------------------------------------------------------


def seeded(build: Callable[[], nn.Module], seed: int = 0) -> nn.Module:
    """Build a module right after seeding, so runs are repeatable."""
    torch.manual_seed(seed)
    return build()


def hf_model(cls: type, config: transformers.PreTrainedConfig) -> nn.Module:
    """A randomly initialised HF model from a config, on the SDPA attention path."""
    return seeded(lambda: cls._from_config(config, attn_implementation=HF_ATTENTION))


def text_batch(with_labels: int = 0) -> Batch:
    """Random (B, T) token ids, an all-ones attention mask and optional class labels."""
    gen = torch.Generator().manual_seed(1)
    batch = {
        "input_ids": torch.randint(0, VOCAB, (TEXT_BATCH, SEQ_LEN), generator=gen),
        "attention_mask": torch.ones(TEXT_BATCH, SEQ_LEN, dtype=torch.long),
    }
    if with_labels:
        batch["labels"] = torch.randint(0, with_labels, (TEXT_BATCH,), generator=gen)
    return batch


def token_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of (B, T, V) logits against (B, T) labels, skipping -100."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)


def bert_pair() -> Pair:
    """BERT-style sequence classifier with a tanh pooler, 2 classes."""
    cfg = TransformerConfig.preset(
        "bert-base", **SHAPE, vocab_size=VOCAB, max_len=SEQ_LEN, dropout=0.0, attn_dropout=0.0
    )
    ours = seeded(lambda: SequenceClassifier(TextEncoder(cfg), num_classes=2, pooler=True))
    hf_cfg = BertConfig(
        vocab_size=VOCAB,
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_ff,
        max_position_embeddings=SEQ_LEN,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=2,
    )
    hf = hf_model(BertForSequenceClassification, hf_cfg)

    def ours_loss(m: nn.Module, b: Batch) -> Tensor:
        return F.cross_entropy(m(b["input_ids"], attention_mask=b["attention_mask"]), b["labels"])

    def hf_loss(m: nn.Module, b: Batch) -> Tensor:
        logits = m(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        return F.cross_entropy(logits, b["labels"])

    tokens = TEXT_BATCH * SEQ_LEN
    flops = flops_per_token(ours.backbone, SEQ_LEN) * tokens  # no vocabulary projection
    flops += 6.0 * TEXT_BATCH * (cfg.d_model**2 + 2 * cfg.d_model)  # pooler + classifier, once per sequence
    return Pair("bert", ours, hf, text_batch(with_labels=2), ours_loss, hf_loss, flops, tokens, "tok")


def gpt_pair() -> Pair:
    """GPT-2-style causal LM with a tied head, next-token loss."""
    cfg = TransformerConfig.preset("gpt2", **SHAPE, vocab_size=VOCAB, max_len=SEQ_LEN, dropout=0.0, attn_dropout=0.0)
    ours = seeded(lambda: CausalLM(cfg))
    hf_cfg = GPT2Config(
        n_embd=cfg.d_model,
        n_layer=cfg.n_layers,
        n_head=cfg.n_heads,
        n_inner=cfg.d_ff,
        vocab_size=VOCAB,
        n_positions=SEQ_LEN,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    hf = hf_model(GPT2LMHeadModel, hf_cfg)
    ids = text_batch()["input_ids"]  # no padding mask: the plain causal path on both sides
    # labels shifted left rather than logits sliced, which would copy the (B, T, V) logits
    labels = torch.cat((ids[:, 1:], torch.full_like(ids[:, :1], -100)), dim=1)
    batch = {"input_ids": ids, "labels": labels}

    def ours_loss(m: nn.Module, b: Batch) -> Tensor:  # as training computes it: accel's measured head + loss
        return lm_loss(m.lm_head, m(b["input_ids"], features_only=True), b["labels"])

    def hf_loss(m: nn.Module, b: Batch) -> Tensor:
        return token_loss(m(input_ids=b["input_ids"]).logits, b["labels"])

    tokens = TEXT_BATCH * SEQ_LEN
    return Pair("gpt", ours, hf, batch, ours_loss, hf_loss, flops_per_token(ours, SEQ_LEN) * tokens, tokens, "tok")


def t5_pair() -> Pair:
    """T5-style encoder-decoder (v1.0: relu, tied and rescaled head), source and target of SEQ_LEN."""
    cfg = TransformerConfig.preset(
        "t5-small", **SHAPE, n_decoder_layers=SHAPE["n_layers"], d_head=64, vocab_size=VOCAB, dropout=0.0
    )
    ours = seeded(lambda: Seq2SeqLM(cfg))
    hf_cfg = T5Config(
        d_model=cfg.d_model,
        d_kv=cfg.head_dim,
        d_ff=cfg.d_ff,
        num_layers=cfg.n_layers,
        num_decoder_layers=cfg.n_decoder_layers,
        num_heads=cfg.n_heads,
        vocab_size=VOCAB,
        dropout_rate=0.0,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
    )
    hf = hf_model(T5ForConditionalGeneration, hf_cfg)
    batch = text_batch()
    gen = torch.Generator().manual_seed(2)
    labels = torch.randint(1, VOCAB, (TEXT_BATCH, SEQ_LEN), generator=gen)
    batch["labels"] = labels
    batch["decoder_input_ids"] = torch.cat((torch.zeros_like(labels[:, :1]), labels[:, :-1]), dim=1)

    def ours_loss(m: nn.Module, b: Batch) -> Tensor:  # as training computes it: accel's measured head + loss
        h = m(b["input_ids"], b["decoder_input_ids"], attention_mask=b["attention_mask"], features_only=True)
        return lm_loss(m.lm_head, h, b["labels"])

    def hf_loss(m: nn.Module, b: Batch) -> Tensor:
        out = m(
            input_ids=b["input_ids"],
            attention_mask=b["attention_mask"],
            decoder_input_ids=b["decoder_input_ids"],
        )
        return token_loss(out.logits, b["labels"])

    # with S == T, flops_per_token covers one source and one target token; add cross-attention scores
    pairs = TEXT_BATCH * SEQ_LEN
    flops = (flops_per_token(ours, SEQ_LEN) + 12.0 * cfg.n_decoder_layers * cfg.inner_dim * SEQ_LEN) * pairs
    return Pair("t5", ours, hf, batch, ours_loss, hf_loss, flops, 2 * pairs, "tok")


def vit_pair() -> Pair:
    """ViT classifier over 32x32 images in 4x4 patches, 10 classes."""
    cfg = TransformerConfig.preset("vit-b/16", **SHAPE, image_size=32, patch_size=4, n_channels=3)
    ours = seeded(lambda: SequenceClassifier(ImageEncoder(cfg), 10))
    hf_cfg = ViTConfig(
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_ff,
        image_size=32,
        patch_size=4,
        num_channels=3,
        num_labels=10,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    hf = hf_model(ViTForImageClassification, hf_cfg)
    gen = torch.Generator().manual_seed(3)
    batch = {
        "pixel_values": torch.randn(IMAGE_BATCH, 3, 32, 32, generator=gen),
        "labels": torch.randint(0, 10, (IMAGE_BATCH,), generator=gen),
    }

    def ours_loss(m: nn.Module, b: Batch) -> Tensor:
        return F.cross_entropy(m(b["pixel_values"]), b["labels"])

    def hf_loss(m: nn.Module, b: Batch) -> Tensor:
        return F.cross_entropy(m(pixel_values=b["pixel_values"]).logits, b["labels"])

    n_patches = (cfg.image_size // cfg.patch_size) ** 2
    flops = flops_per_token(ours.backbone, n_patches + 1) * (n_patches + 1) * IMAGE_BATCH
    flops += 6.0 * (cfg.n_channels * cfg.patch_size**2 * cfg.d_model) * n_patches * IMAGE_BATCH  # patch conv
    flops += 6.0 * cfg.d_model * 10 * IMAGE_BATCH  # classifier
    return Pair("vit", ours, hf, batch, ours_loss, hf_loss, flops, IMAGE_BATCH, "img")


BUILDERS: dict[str, Callable[[], Pair]] = {"bert": bert_pair, "gpt": gpt_pair, "t5": t5_pair, "vit": vit_pair}


def n_params(model: nn.Module) -> int:
    """Unique trainable parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())


def check_params(pair: Pair) -> tuple[int, int]:
    """Both parameter counts; the shapes are meant to match exactly, heads and poolers included."""
    ours, hf = n_params(pair.ours), n_params(pair.hf)
    if ours != hf:
        raise AssertionError(f"{pair.family}: ours has {ours:,} parameters, HF {hf:,}; the shapes differ")
    return ours, hf
