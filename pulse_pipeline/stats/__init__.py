"""Statistics of the estimates stage: naive, prediction-powered (PPI++, cross-PPI) and doubly robust (AIPW) means."""
