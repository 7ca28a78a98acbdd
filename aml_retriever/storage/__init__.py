"""Where bytes live: the catalog and one SQLite file per user behind one facade (`store`): the
catalog and the lock a server holds on it (`catalog`), the schema every file is brought to
(`schema`) through numbered migrations (`migrations`), the user files and their quarantine
(`user_files`) and their page size (`pages`), the connections every thread shares (`pool`),
the gate that keeps a file's
opening and its removal apart (`gate`), read and write transactions
(`transactions`), the committed state a read sees (`generation`), planned checkpoints
(`checkpoints`), what the disk can refuse (`resources`), a user file read through a copy in
memory where it cannot be opened where it lies (`copies`), the audit log (`audit`), copies of a
live store (`backup`), which stored messages a read may see (`timeline`), the conversation links
and segments written beside each message (`views`), and the names the conversation gives its
speakers (`speakers`).

May import: `analysis`, `common`. Knows SQL; knows nothing of ranking, requests or transports.
"""
