"""aml_retriever: a deterministic, evidence-first memory retriever for LLM agents."""

__version__ = "0.1.0"
