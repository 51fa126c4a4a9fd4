"""The book's notebooks: execute them, set the repository URL, student versions, the nbgrader course."""
