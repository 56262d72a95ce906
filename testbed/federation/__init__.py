"""Federation core: client sampling and the communication ledger."""
