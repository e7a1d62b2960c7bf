"""Statistics over reward profiles: loading, estimators, uncertainty, variance, reward vs length."""
