"""`ngrp report`: one self-contained HTML page (`html`) with matplotlib figures (`plots`)."""
