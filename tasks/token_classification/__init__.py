"""Token classification (NER, tagging) on any text backbone: CoNLL/JSONL data, entity-level F1."""
