"""LightningModule for token classification: loss on labelled subwords, word-level decoding, entity-level F1."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.classification import MulticlassAccuracy

from tasks.token_classification.crf import TagTransitions
from tasks.token_classification.model import build_token_classifier
from tetraformer.core import TextEncoder, TransformerConfig
from tetraformer.core.backbones import BackboneKind
from tetraformer.core.ensemble import ensemble_members, member_outputs
from tetraformer.core.heads import TokenClassificationHead
from tetraformer.core.viterbi import chain_marginals, constrained_decode
from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.conll import join_words
from tetraformer.data.spec import DataSpec
from tetraformer.data.tag_schemes import allowed_transitions, entity_spans
from tetraformer.data.word_alignment import gather_words, word_mask
from tetraformer.errors import ConfigError
from tetraformer.interop import load_hf
from tetraformer.training.base.ensemble import check_ensemble
from tetraformer.training.base.labelled import LabelledTask
from tetraformer.training.base.module import TaskModule
from tetraformer.training.base.predictions import PREDICTED
from tetraformer.training.metrics.entity import REPORT_COLUMNS, EntityScore
from tetraformer.training.reports.loggers import wandb_logger
from tetraformer.training.reports.tables import write_table

log = logging.getLogger(__name__)
Decoding = Literal["argmax", "constrained"]
ENTITY_SCORES = ("precision", "recall", "f1")


class TokenClassification(LabelledTask, TaskModule):
    """One tag per word (NER, chunking, POS) on an encoder, decoder or encoder-decoder backbone.

    The loss covers the labelled subwords; metrics see one prediction per word, reassembled from a sentence's
    windows: token accuracy and seqeval's entity precision/recall/F1 (`strict_scheme` for its strict mode).
    `decode constrained` runs Viterbi over the scheme's allowed transitions, so no I-X follows O in IOB2.
    With `crf`, a linear-chain CRF learns tag-to-tag scores over the words' logits (its loss is the sentences'
    negative log-likelihood per word, first subwords only) and Viterbi decodes with them (and the scheme's
    constraints, when `decode constrained`).
    With `ensemble` K > 1, K taggers of the same shape train side by side from their own initial weights, each
    on its own loss (the loss logged is their mean); words are decoded from the mean of their log-probabilities
    (with `crf`, of their emissions and tag-to-tag scores): a product of experts, which cuts the run-to-run
    swings of a small tagger trained from scratch, at K times the cost of a step.
    With `min_entity_prob` t > 0, a decoded entity is dropped (its words tagged O) when one of its words has its
    decoded tag with probability under t: marginals by forward-backward over the scores and transitions Viterbi
    used, so fewer, surer entities (precision for recall).
    Test writes the per-type entity report; no per-tag confusion report is made (label_names stays None):
    B-/I- tag counts mislead where entities are what is scored. The tag vocabulary and scheme travel in the
    checkpoint. The TaskModule options (arch, optim, init_from, label_smoothing) pass through `**kwargs`.
    """

    hf_architectures = ("BertForTokenClassification",)
    label_word = "tags"

    def __init__(
        self,
        backbone: BackboneKind = "encoder",
        decode: Decoding = "argmax",
        strict_scheme: bool = False,
        crf: bool = False,
        ensemble: int = 1,
        min_entity_prob: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.save_hyperparameters()
        if decode not in ("argmax", "constrained"):
            raise ConfigError(f"--model.decode {decode!r}; expected argmax or constrained")
        self.backbone_kind, self.decode, self.strict_scheme, self.crf = backbone, decode, strict_scheme, crf
        self.ensemble = check_ensemble(ensemble, self, "taggers")
        if not 0 <= min_entity_prob <= 1:
            raise ConfigError(f"--model.min_entity_prob {min_entity_prob}: must be in [0, 1] (0 keeps every entity)")
        self.min_entity_prob = min_entity_prob
        self.transitions: tuple[Tensor, Tensor, Tensor] | None = None  # (start, trans, end) for Viterbi

    # --- network -------------------------------------------------------------------------------------
    @property
    def fresh_parts(self) -> tuple[str, ...]:
        """The tagging head, and the CRF's scores with `crf`: what trains in full under LoRA."""
        return ("head", "crf") if self.crf else ("head",)

    @property
    def scheme(self) -> str | None:
        """The tag scheme of the data's (the checkpoint's) tags."""
        return self.spec.extras.get("scheme") if self.spec is not None else None

    def configure_model(self) -> None:
        """Build from the spec; keep a Hugging Face source's classifier when its labels are this data's tags."""
        fresh = self.net is None
        super().configure_model()
        if fresh and self.net is not None and self.init_from and Path(self.init_from).is_dir():
            self._take_hf_classifier(Path(self.init_from))

    def _take_hf_classifier(self, source: Path) -> None:
        """Keep a Hugging Face BertForTokenClassification's classifier when its labels are this data's tags.

        Its labels fit when id2label names our tags in our order, or only says how many (LABEL_i) and the count
        matches; otherwise the head stays fresh (logged).
        """
        model = load_hf(source)
        head = getattr(model, "head", None)
        if not isinstance(head, TokenClassificationHead):
            return
        names = [str(v) for _, v in sorted((int(k), v) for k, v in (model.hf_config.get("id2label") or {}).items())]
        generic = names == [f"LABEL_{i}" for i in range(len(names))] or not names
        if head.classifier.out_features != len(self.vocabulary) or not (generic or names == self.vocabulary.names):
            log.info(
                "%s: its classifier's labels %s are not this data's tags: the head starts fresh",
                source,
                names or head.classifier.out_features,
            )
            return
        self.net.head.load_state_dict(head.state_dict())
        log.info("%s: kept its token classifier (%d labels)", source, len(self.vocabulary))

    def network_config(self, spec: DataSpec) -> TransformerConfig:
        """The architecture with the tokenizer's vocabulary, room for max_length, one segment type on an encoder."""
        max_len = max(self.arch.max_len, spec.max_length)
        types = self.arch.type_vocab_size or (2 if self.backbone_kind == "encoder" else 0)  # 2: BERT's shape
        return self.arch.replace(vocab_size=spec.vocab_size, max_len=max_len, type_vocab_size=types)

    def make_network(self, cfg: TransformerConfig) -> nn.Module:
        """A TokenClassifier with one output per tag (a CRFTokenClassifier with `crf`); an Ensemble of
        `ensemble` of them when it is above 1."""
        return build_token_classifier(cfg, self.backbone_kind, len(self.vocabulary), self.crf, self.ensemble)

    def members(self) -> list[nn.Module]:
        """The taggers whose scores are pooled: the network itself, or an ensemble's members."""
        return ensemble_members(self.net)

    # --- steps ---------------------------------------------------------------------------------------
    def forward_batch(self, batch: dict[str, Tensor]) -> Tensor:
        """(B, T) window ids and mask (and segments on an encoder) -> (K, B, T, L) logits of the K taggers."""
        extra = {"token_type_ids": batch["token_type_ids"]} if isinstance(self.net.backbone, TextEncoder) else {}
        return member_outputs(self.net, batch["input_ids"], attention_mask=batch["attention_mask"], **extra)

    def word_scores(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """(logits (K, B, T, L) of the windows, word-level scores (S, W, L) of the batch's sentences: the taggers'
        mean log-probabilities, or their mean CRF emissions, the logits themselves)."""
        logits = self.forward_batch(batch).float()  # (K, B, T, L)
        words = (logits.detach() if self.crf else logits.detach().log_softmax(-1)).mean(0)  # (B, T, L)
        return logits, gather_words(words, batch["word_index"], batch["sentence"], fill=0.0)

    def decode_words(self, scores: Tensor, mask: Tensor) -> Tensor:
        """(S, W, L) word scores, (S, W) word mask -> (S, W) tag ids, -100 off the mask; with `min_entity_prob`,
        an entity with a word less sure than it is tagged O."""
        chain = self.decoding_chain(scores.device)
        if chain is None:
            preds = scores.argmax(-1).masked_fill(~mask, IGNORE_INDEX)  # (S, W)
        else:
            start, trans, end = chain
            preds = constrained_decode(scores, mask, trans, start, end)
        if not self.min_entity_prob:
            return preds
        if chain is None:  # each word on its own: the softmax of its scores
            n = scores.shape[-1]
            chain = (scores.new_zeros(n), scores.new_zeros(n, n), scores.new_zeros(n))
        marginals = chain_marginals(scores, mask, chain[1], chain[0], chain[2])  # (S, W, L)
        sure = marginals.gather(2, preds.clamp(min=0).unsqueeze(2)).squeeze(2)  # (S, W) each decoded tag's probability
        return drop_unsure_entities(preds, sure, self.min_entity_prob, self.vocabulary.names, self.scheme)

    def decoding_chain(self, device: torch.device) -> tuple[Tensor, Tensor, Tensor] | None:
        """(start, trans, end) Viterbi decodes with: the scheme's allowed transitions (`decode constrained`), the
        CRFs' pooled scores (`crf`, within those), or None for a per-word argmax."""
        if self.decode == "argmax" and not self.crf:
            return None
        allowed = None
        if self.decode == "constrained":
            if self.transitions is None or self.transitions[0].device != device:
                self.transitions = tuple(t.to(device) for t in allowed_transitions(self.vocabulary.names, self.scheme))
            allowed = self.transitions
        return self.pooled_transitions(allowed) if self.crf else allowed

    def pooled_transitions(self, allowed: tuple[Tensor, Tensor, Tensor] | None) -> tuple[Tensor, Tensor, Tensor]:
        """(start, trans, end) for Viterbi: the mean over the taggers of their CRFs' scores, -inf where not allowed."""
        scores = [member.crf.decode_scores(allowed) for member in self.members()]
        return tuple(torch.stack(parts).mean(0) for parts in zip(*scores, strict=True))

    def sequence_loss(self, logits: Tensor, batch: dict[str, Tensor], crf: TagTransitions) -> Tensor:
        """The sentences' CRF negative log-likelihood per labelled word (logits (B, T, L) of the windows)."""
        emissions = gather_words(logits, batch["word_index"], batch["sentence"], fill=0.0)  # (S, W, L)
        targets = gather_words(batch["labels"], batch["word_index"], batch["sentence"])  # (S, W)
        mask = targets != IGNORE_INDEX  # (S, W)
        nll = crf.negative_log_likelihood(emissions, targets, mask)  # (S,)
        return nll.sum() / mask.sum().clamp(min=1)

    def loss(self, logits: Tensor, batch: dict[str, Tensor]) -> Tensor:
        """The mean over the taggers (logits (K, B, T, L)) of their cross-entropy over labelled subwords, or with
        `crf` of their CRF's loss over words."""
        losses = [
            self.sequence_loss(member_logits, batch, member.crf)
            if self.crf
            else self.cross_entropy(member_logits, batch["labels"])
            for member_logits, member in zip(logits, self.members(), strict=True)
        ]
        return torch.stack(losses).mean()

    def compute(self, batch: dict[str, Tensor], stage: str) -> dict[str, Tensor]:
        """The loss; outside training, word-level predictions feed the metrics.

        Training steps decode nothing: a per-step entity F1 of one batch says little and costs a Viterbi pass
        and a seqeval call per step.
        """
        if stage == "train":
            return {"loss": self.loss(self.forward_batch(batch).float(), batch)}
        logits, scores = self.word_scores(batch)
        targets = gather_words(batch["labels"], batch["word_index"], batch["sentence"])  # (S, W)
        preds = self.decode_words(scores, targets != IGNORE_INDEX)
        return {"loss": self.loss(logits, batch), "preds": preds, "targets": targets}

    def make_metrics(self) -> dict[str, Metric]:
        """Token (word) accuracy, and entity precision, recall and F1 (seqeval, micro over entities)."""
        metrics: dict[str, Metric] = {
            "token_acc": MulticlassAccuracy(len(self.vocabulary), average="micro", ignore_index=IGNORE_INDEX)
        }
        for score in ENTITY_SCORES:
            metrics[f"entity_{score}"] = EntityScore(self.vocabulary.names, self.scheme, self.strict_scheme, score)
        return metrics

    def batch_tokens(self, batch: dict[str, Tensor]) -> int:
        """Real tokens in the batch's windows."""
        return int(batch["attention_mask"].sum())

    def on_test_epoch_end(self) -> None:
        """Write and log the per-type entity report (precision, recall, F1, support) of the test set."""
        super().on_test_epoch_end()
        rows = self.test_metrics["entity_f1"].report_rows()  # synced over processes: every rank calls it
        if not self.trainer.is_global_zero:
            return
        for name, _, _, f1, _ in rows:
            if not name.endswith(" avg"):
                self.log(f"test/entity_f1/{name}", f1, rank_zero_only=True)
        write_table(
            self.trainer.default_root_dir,
            "test_entities",
            REPORT_COLUMNS,
            rows,
            logger=wandb_logger(self.loggers),
            key="test/entities",
            step=self.global_step,
        )

    # --- prediction ----------------------------------------------------------------------------------
    def predict_step(self, batch: dict[str, Any], batch_idx: int) -> list[dict[str, Any]]:
        """Each input sentence's fields with its words, one predicted tag per word and the entity spans they make."""
        _, scores = self.word_scores(batch)
        preds = self.decode_words(scores, word_mask(batch["word_index"], batch["sentence"]))  # (S, W)
        out = []
        for record, words, ids in zip(batch["records"], batch["words"], preds.tolist(), strict=True):
            tags = [self.vocabulary.names[i] for i in ids[: len(words)]]
            entities = [
                {"type": kind, "start": start, "end": end, "text": join_words(words[start:end], batch["word_split"])}
                for kind, start, end in entity_spans(tags, self.scheme)
            ]
            out.append({**record, "tokens": words, PREDICTED: tags, "entities": entities})
        return out


def drop_unsure_entities(preds: Tensor, sure: Tensor, threshold: float, names: list[str], scheme: str | None) -> Tensor:
    """(S, W) tag ids (-100 off the words), (S, W) each tag's probability -> the ids with every entity that has a
    word under `threshold` tagged O."""
    preds, outside = preds.clone(), names.index("O")
    for row, (ids, probs) in enumerate(zip(preds.tolist(), sure.tolist(), strict=True)):
        words = [i for i, tag in enumerate(ids) if tag != IGNORE_INDEX]  # (positions of the row's words)
        tags = [names[ids[i]] for i in words]
        for _, start, end in entity_spans(tags, scheme):
            if min(probs[words[i]] for i in range(start, end)) < threshold:
                preds[row, [words[i] for i in range(start, end)]] = outside
    return preds
