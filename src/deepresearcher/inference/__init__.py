"""Running models, for every caller: the one local engine, the one model loader, the one HTTP client.

Policy generators (``generate/``) and chat clients for the reader and the judge (``llm/``) are thin
adapters over this package, so batching, sampling, retries and the embedded model's on-disk copy
exist once. It imports nothing of ``generate``, ``llm``, ``agent`` or ``train``.
"""
