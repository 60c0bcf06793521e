"""The language model: an OpenAI-compatible client, the extraction of memories from a
transcript, and the prompts (Markdown files shipped with the package)."""
