"""DataLoader wrappers for tests of what stops its workers."""


class Keeping:
    """A DataLoader whose iterators stay referenced here, so only an explicit shutdown stops their
    workers (a dropped iterator would stop them when collected, hiding a missing one)."""

    def __init__(self, loader):
        self.loader, self.iterators = loader, []

    def __iter__(self):
        self.iterators.append(iter(self.loader))
        return self.iterators[-1]
