"""The web console `aios-ledger serve` answers under `/` (beside the API under `/v1`):
server-rendered pages for the people who answer for agents.

- `console.py`: the frame: `Console` (sessions, templates, routes), `Page`, `Visit`,
  `Viewer`, `Rendered`, the CSRF check and `console_principal(request)`;
- `sessions.py`: the sessions, in the server's memory;
- `pages/`: one module per page, each with its `PAGES` rows, listed in `console_pages()`;
- `templates/`: Jinja2 templates (autoescaped), every page extending `base.html`;
- `assets.py`: `static/` (the stylesheet and the scripts) under content-digest addresses;
- `static/`: the stylesheet and the pages' scripts.

docs/console.md tells how to add a page.
"""
