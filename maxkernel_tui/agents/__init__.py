"""LLM providers, sub-agents and orchestration (never imports Textual)."""
