"""LightningModule for masked-LM pretraining: masked-token loss and accuracy, optional NSP loss."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.classification import MulticlassAccuracy

from tasks.masked_lm.model import build_bert
from tetraformer.core import TransformerConfig
from tetraformer.core.accounting import TokenCost, token_cost
from tetraformer.data import IGNORE_INDEX
from tetraformer.data.spec import DataSpec
from tetraformer.errors import at_least
from tetraformer.training.base.module import TaskModule
from tetraformer.training.base.predictions import top_k


class MaskedLanguageModeling(TaskModule):
    """Pretrains a BERT-style encoder on masked tokens (BERT's 15%, 80/10/10), with NSP when asked.

    `predict` fills in the mask tokens users write in their texts (the `top_k` candidates per mask).
    The loss is the masked-token cross-entropy (plus the NSP cross-entropy with `next_sentence`); the
    vocabulary projection runs only at the masked positions. The TaskModule options (arch, optim,
    init_from, label_smoothing) pass through `**kwargs`.
    """

    hf_architectures = ("BertForMaskedLM",)

    def __init__(self, next_sentence: bool = False, top_k: int = 5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        at_least(self, 1, top_k=top_k)
        self.save_hyperparameters()
        self.next_sentence, self.top_k = next_sentence, top_k

    def network_config(self, spec: DataSpec) -> TransformerConfig:
        """The architecture with the tokenizer's vocabulary, room for the rows, and BERT's two segments.

        Two segment embeddings even without NSP, so a classifier fine-tuned from it can read sentence pairs.
        """
        max_len = max(self.arch.max_len, spec.max_length)
        types = max(self.arch.type_vocab_size, 2)
        return self.arch.replace(vocab_size=spec.vocab_size, max_len=max_len, type_vocab_size=types)

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A BERT with the masked-LM head (and the NSP head with `next_sentence`)."""
        return build_bert(cfg, self.next_sentence)

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """Masked-token cross-entropy (+ NSP); the masked tokens' predictions feed the accuracy."""
        labels = batch["labels"]  # (B, T), IGNORE_INDEX where not masked
        chosen = labels != IGNORE_INDEX  # (B, T)
        mlm_logits, nsp_logits = self.net.pretraining_logits(
            batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"), positions=chosen
        )  # (N, V), (B, 2) | None
        targets = labels[chosen]  # (N,)
        mlm_loss = self.cross_entropy(mlm_logits, targets) if len(targets) else mlm_logits.sum()
        out = {"loss": mlm_loss, "preds": mlm_logits.argmax(-1), "targets": targets}
        if self.next_sentence:
            nsp_targets = batch["next_sentence_label"]  # (B,)
            nsp_loss = self.cross_entropy(nsp_logits, nsp_targets)
            nsp_accuracy = (nsp_logits.argmax(-1) == nsp_targets).float().mean()
            out.update(
                loss=mlm_loss + nsp_loss,
                mlm_loss=mlm_loss.detach(),
                nsp_loss=nsp_loss.detach(),
                nsp_accuracy=nsp_accuracy,
            )
        return out

    def make_metrics(self) -> dict[str, Metric]:
        """Accuracy over the epoch's masked tokens (one vote per token, not a mean of batch means)."""
        return {"mlm_accuracy": MulticlassAccuracy(self.net.cfg.vocab_size, average="micro", ignore_index=IGNORE_INDEX)}

    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> list[dict[str, Any]]:
        """Fill-mask: per text, the `top_k` tokens (with probabilities) for each mask token it holds."""
        ids = batch["input_ids"]  # (B, T)
        at_mask = ids == self.tokenizer.mask_token_id  # (B, T)
        probs = self.net.pretraining_logits(ids, batch["attention_mask"], positions=at_mask)[0].softmax(-1)
        candidates = top_k(probs, self.top_k)  # per mask of the batch: (token id, probability), best first
        counts = at_mask.sum(1).tolist()
        out, start = [], 0
        for text, n in zip(batch["texts"], counts, strict=True):
            masks = [
                [{"token": self.tokenizer.convert_ids_to_tokens(i), "score": p} for i, p in candidates[m]]
                for m in range(start, start + n)
            ]
            out.append({"text": text, "masks": masks})
            start += n
        return out

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Real (unpadded) tokens fed to the encoder."""
        return int(batch["attention_mask"].sum())

    def flop_costs(self, net: nn.Module) -> dict[str, TokenCost]:
        """Every token passes the encoder (and the NSP head, counted per token: small); only masked ones the head."""
        return {"encoder": token_cost(net, exclude=("head",)), "head": token_cost(net.head)}

    def batch_flops(self, batch: dict[str, Tensor], costs: dict[str, TokenCost]) -> float:
        """Real tokens through the encoder over their mean row length; masked tokens through the vocabulary head."""
        tokens = self.batch_tokens(batch)
        masked = int((batch["labels"] != IGNORE_INDEX).sum())
        return costs["encoder"].flops(tokens, tokens / batch["input_ids"].shape[0]) + costs["head"].flops(masked, 0)
