"""The chat API model kind: an OpenAI-compatible API that only generates text (spec, client, prices, the model)."""
