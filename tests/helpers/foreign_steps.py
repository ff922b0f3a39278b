"""Stand-ins for a foreign library's Compose (torchvision's, in the tests that run without it): a
`transforms` list called in turn, which is all that fastprep's port, stand-ins and advice read."""


class ForeignCompose:
    """Stands in for torchvision's Compose: a `transforms` list, called in turn."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x
