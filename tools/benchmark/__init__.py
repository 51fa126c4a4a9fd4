"""The ETT benchmark: the book's models on ETT against published numbers."""
