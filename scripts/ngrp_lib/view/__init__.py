"""`ngrp view`: a local web app over a run's rollouts (and a second run's, to compare).

`index.py` builds and caches the byte-offset index, `queries.py` and `compare.py` answer each page's
question as JSON, `pages.py` renders the same data as HTML through escaping templates (`markup.py`,
`templates/`), `app.py` serves both. Nothing is imported here: aiohttp loads only when a server starts.
"""
