"""contextrag.index.lexical: the extraction-free lexical context: ``families`` builds the title, phrase
and term attribute families (map-reduce over blocks of chunks), ``tokens`` tokenises and matches one
block (also the BM25 tokenisation), ``nodes`` selects join and meet concept nodes over the families."""
