"""The files themselves: JSONL reading and writing, schemas, names and identity keys, endpoints, numbering."""
