"""mlip.data.train_valid_split: the (train, valid) split of the training, public for the benchmarks."""

from types import SimpleNamespace

from mlip.data import split_dataset, train_valid_split


def items(n, groups=None):
    return [SimpleNamespace(index=k, group=None if groups is None else groups[k]) for k in range(n)]


def test_without_groups_it_is_split_dataset_with_two_parts():
    samples = items(40)
    train, valid = train_valid_split(samples, 0.25, seed=3)
    want_train, want_valid = split_dataset(samples, fractions=(0.75, 0.25), seed=3)
    assert [s.index for s in train] == [s.index for s in want_train]
    assert [s.index for s in valid] == [s.index for s in want_valid]
    assert len(valid) == 10 and sorted(s.index for s in train + valid) == list(range(40))
    # another seed, another split
    assert [s.index for s in train_valid_split(samples, 0.25, seed=4)[1]] != [s.index for s in valid]


def test_samples_of_one_group_stay_on_one_side():
    groups = [k // 4 for k in range(48)]  # 12 groups of 4 (e.g. frames of one MD trajectory)
    train, valid = train_valid_split(items(48, groups), 0.25, seed=0)
    assert not {s.group for s in train} & {s.group for s in valid}
    assert valid and len(train) + len(valid) == 48
    assert [s.index for s in valid] == [s.index for s in split_dataset(
        items(48, groups), fractions=(0.75, 0.25), seed=0, group_by="group")[1]]


def test_no_validation_fraction_keeps_every_sample_for_training():
    samples = items(5)
    train, valid = train_valid_split(samples, 0.0, seed=0)
    assert train is samples and valid == []
