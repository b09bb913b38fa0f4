"""Text and models: extraction to markdown, chunking, the embedding model and its cache,
sentences and statements, and the clients of an LLM or a reranker. Imports only the package
root and `openkl.files`."""
