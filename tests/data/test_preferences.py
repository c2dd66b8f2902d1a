from hf_ext.data import extract_final_number, preference_dataset


def test_pairs_are_deterministic_and_differ_only_in_correctness():
    ds = preference_dataset(200, difficulty=2, seed=4)
    assert ds.to_dict() == preference_dataset(200, difficulty=2, seed=4).to_dict()
    for row in ds:
        chosen, rejected = row["chosen"][0]["content"], row["rejected"][0]["content"]
        assert extract_final_number(chosen) == row["answer"]
        assert extract_final_number(rejected) == row["rejected_answer"] != row["answer"]


def test_length_does_not_give_away_the_preferred_response():
    ds = preference_dataset(400, seed=0)
    longer = [len(r["chosen"][0]["content"]) > len(r["rejected"][0]["content"]) for r in ds]
    shorter = [len(r["chosen"][0]["content"]) < len(r["rejected"][0]["content"]) for r in ds]
    assert 0.25 < sum(longer) / len(ds) < 0.55 and 0.25 < sum(shorter) / len(ds) < 0.55
