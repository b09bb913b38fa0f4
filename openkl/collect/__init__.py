"""Collecting and keeping fresh: documents stored from files, the web, arXiv, repositories
and S3, refresh policies, distillation, and `ok doctor`'s checks."""
