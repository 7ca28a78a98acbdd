"""Text analysis: how text becomes index terms (`tokenizer`), the stop words dropped from queries
(`stopwords`), dates read and resolved in text (`dates`) by
the tense of the sentence they are named in (`tense`), and the features an Add extracts once
and stores with a message (`features`), the names a conversation gives its speakers
(`speakers`), a reader's tokens of a text (`tokens`), an Add's place among its
conversation's Adds, read from its request id (`sequence`), and the words nearest in meaning to
an English word (`related`). Pure functions of strings: no SQL, and no file but the neighbour
list shipped beside them (data/related.txt.gz, read once a process).

May import: `common`.
"""
