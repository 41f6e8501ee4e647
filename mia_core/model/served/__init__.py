"""Models behind a server (vLLM, SGLang, OpenAI-compatible endpoints), scored over HTTP like in-process ones."""
