"""Payments: the purchase flow of fetch_paid, the ledger of payment intents, budgets."""
