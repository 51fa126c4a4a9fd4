"""The repository's scripts, grouped by role. Run each from the repository root as a
module, so that this checkout's labsupport and the scripts' shared pieces import without path
edits: ``python -m tools.book.make_student``.

- `tools.book`: the book's notebooks (execute them, set the repository URL, student versions,
  the nbgrader course, the reference lists);
- `tools.ci`: what the tests and the GPU runner use (the browser, its web assets, gpu_check);
- `tools.benchmark`: the ETT benchmark against published numbers;
- `tools.experiments`: the measurements behind the profiles' sizes (see its README).
"""
