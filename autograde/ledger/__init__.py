"""The ledger: the one owner of OUT. Every OUT path is named in ``layout.py``; the signed records
(``store.py``), the tables grading writes (``results.py``), the score tables' columns and rows
(``tables.py``), the late rules (``late.py``) and nbgrader's gradebook (``gradebook.py``) are here,
and every command reads OUT through it."""
