"""Research behaviours from hand-built trajectories, each measure both ways, and their aggregation."""

from __future__ import annotations

import math

import pytest

from deepresearcher.agent.trajectory import ToolCallRecord, Trajectory, TurnRecord
from deepresearcher.eval.behaviours import (
    TaskLabels,
    behaviour_rates,
    behaviour_record,
    behaviour_rows,
    flat_rates,
    rates_by_type,
)

WIKI = "https://en.wiki.test/wiki/"


def search(query: str, *hits: tuple[str, str, str]) -> TurnRecord:
    """A web_search turn whose results are (title, url, snippet) hits."""
    observation = [{"search_query": query, "web_page_info_list": [
        {"title": t, "url": u, "quick_summary": s} for t, u, s in hits]}]
    return TurnRecord(text="<think>search</think>", tool_call=ToolCallRecord(
        name="web_search", arguments={"query": [query]}, observation=observation))


def browse(*pages: tuple[str, str]) -> TurnRecord:
    """A browse_webpage turn that read (url, notes) pages."""
    return TurnRecord(text="<think>read</think>", tool_call=ToolCallRecord(
        name="browse_webpage", arguments={"url_list": [u for u, _ in pages]},
        observation=[{"url": u, "information": notes} for u, notes in pages]))


def episode(*turns: TurnRecord, answer: str | None, question: str = "q?") -> Trajectory:
    return Trajectory(question=question, turns=list(turns), answer=answer)


def hop(subject: str, relation: str, value: str, *urls: str) -> dict:
    return {"subject": subject, "relation": relation, "value": value, "query": f"{subject} {relation}",
            "evidence_urls": list(urls)}


HOP2 = {"id": "t1", "type": "hop2", "question": "In which city was the founder of Acme Corp born?",
        "golds": ["Veloria"], "answerable": True, "evidence_urls": [WIKI + "Acme_Corp", WIKI + "Ann_Lee"],
        "chain": [hop("Acme Corp", "founded_by", "Ann Lee", WIKI + "Acme_Corp"),
                  hop("Ann Lee", "born_in", "Veloria", WIKI + "Ann_Lee")]}


# ---------------------------------------------------------------------------------------------- grounding

REAL = {"type": "hotpotqa", "golds": ["Ann Lee"], "answerable": True}


def test_a_world_answer_is_grounded_when_a_page_that_states_the_asked_fact_showed_it():
    """The asked fact is the last hop's (Ann Lee's birthplace): the page the world records for it, read, grounds
    "Veloria"; the same name in another page does not, nor does the earlier hop's value."""
    turns = (search("Acme Corp founder", ("Acme Corp", WIKI + "Acme_Corp", "A company.")),
             browse((WIKI + "Acme_Corp", "| Founded by | Ann Lee |")),
             browse((WIKI + "Ann_Lee", "| Place of birth | Veloria |")))
    assert behaviour_record(episode(*turns, answer="Veloria"), HOP2).grounded is True
    elsewhere = (browse((WIKI + "Acme_Corp", "Ann Lee moved to Veloria later.")),)
    unsupported = behaviour_record(episode(*elsewhere, answer="Veloria"), HOP2)
    assert unsupported.grounded is False and "unsupported" in unsupported.tags
    assert behaviour_record(episode(*turns, answer="Ann Lee"), HOP2).grounded is False  # hop 1's value, not the asked one
    page_without_value = (browse((WIKI + "Ann_Lee", "Ann Lee is a figure whose work is known.")),)
    assert behaviour_record(episode(*page_without_value, answer="Veloria"), HOP2).grounded is False


def test_a_search_hit_of_the_stating_page_grounds_too():
    turns = (search("Ann Lee birthplace", ("Ann Lee", WIKI + "Ann_Lee", "Place of birth Veloria")),)
    assert behaviour_record(episode(*turns, answer="Veloria"), HOP2).grounded is True


def test_real_questions_ground_by_the_text_test_and_the_agents_own_query_and_urls_do_not_count():
    turns = (search("Acme Corp founder", ("Acme Corp", "https://acme.test/", "founded by Ann Lee")),)
    assert behaviour_record(episode(*turns, answer="Ann Lee"), REAL).grounded is True
    own = (search("Was Bob Stone the founder", ("Stone", "https://bob-stone.test/", "nothing here")),)
    assert behaviour_record(episode(*own, answer="Bob Stone"), REAL).grounded is False


def test_numbers_ground_through_normalization_and_yes_no_or_abstentions_are_not_checked_on_real_questions():
    turns = (browse(("https://x.test/", "population 1,234,567")),)
    assert behaviour_record(episode(*turns, answer="1234567"), REAL).grounded is True
    assert behaviour_record(episode(*turns, answer="yes"), REAL).grounded is None
    assert behaviour_record(episode(*turns, answer="I cannot find the answer."), REAL).grounded is None
    assert behaviour_record(episode(*turns, answer=None), REAL).grounded is None
    city = {"type": "hop1", "golds": ["1234567"], "answerable": True, "question": "What is the population of Vel?",
            "evidence_urls": [WIKI + "Vel"], "chain": [hop("Vel", "population", "1234567", WIKI + "Vel")]}
    assert behaviour_record(episode(browse((WIKI + "Vel", "| Inhabitants | 1,234,567 |")), answer="1234567"),
                            city).grounded is True


def test_a_failed_call_grounds_nothing():
    failed = TurnRecord(text="", tool_call=ToolCallRecord(name="web_search", arguments={"query": ["Ann Lee"]},
                                                          text='{"error": "Ann Lee not found"}', error="failed"))
    assert behaviour_record(episode(failed, answer="Ann Lee"), REAL).grounded is False
    assert behaviour_record(episode(failed, answer="Veloria"), HOP2).grounded is False


def test_an_answer_to_an_unanswerable_world_task_is_never_grounded():
    task = {"type": "unanswerable", "golds": ["cannot find"], "answerable": False, "evidence_urls": [WIKI + "Ann_Lee"],
            "chain": [hop("Ann Lee", "birth_year", "")]}
    record = behaviour_record(episode(browse((WIKI + "Ann_Lee", "born 1950")), answer="1950"), task)
    assert record.grounded is False
    assert behaviour_record(episode(answer="cannot find"), task).grounded is None


def test_searched_then_answered_counts_episodes_that_searched_and_then_answered_of_all():
    """The fresh-install bar (docs/agent.md): an answer with no search before it, or a search never answered,
    does not count; a search the backend failed still was a search."""
    failed = TurnRecord(text="", tool_call=ToolCallRecord(name="web_search", arguments={"query": ["Ann Lee"]},
                                                          error="backend down"))
    records = [behaviour_record(episode(search("Acme Corp founder"), answer="Ann Lee"), HOP2),
               behaviour_record(episode(failed, answer="Ann Lee"), HOP2),
               behaviour_record(episode(browse((WIKI + "Acme_Corp", "Ann Lee")), answer="Ann Lee"), HOP2),
               behaviour_record(episode(answer="Ann Lee"), HOP2),
               behaviour_record(episode(search("Acme Corp founder"), answer=None), HOP2)]
    assert [r.searched for r in records] == [True, True, False, False, True]
    assert behaviour_rates(records)["searched_then_answered"] == {"rate": 0.4, "n": 5}
    assert behaviour_rows({"all": behaviour_rates(records)})[0]["searched, then answered"] == "40% (5)"


# ---------------------------------------------------------------------------------------------- cross-checking

CONFLICT = {"id": "c1", "type": "conflict", "question": "When was Acme Corp founded?", "golds": ["1901"],
            "answerable": True, "evidence_urls": [WIKI + "Acme_Corp", "https://orgfinder.io/directory/acme"],
            "chain": [{**hop("Acme Corp", "founded_year", "1901", WIKI + "Acme_Corp",
                             "https://orgfinder.io/directory/acme"),
                       "contradicting_urls": ["https://factnugget.com/q/acme_corp-founded-year"],
                       "contradicting_value": "1907"}]}
BLOG = "https://factnugget.com/q/acme_corp-founded-year"
OTHER_BLOG = "https://fan42.quillblog.net/posts/acme_corp-headquarters"


def test_pages_and_sites_read_are_distinct_counts_and_reading_two_pages_is_not_yet_a_cross_check():
    turns = (browse((WIKI + "Acme_Corp", "a"), (WIKI + "Ann_Lee", "b")),
             browse((WIKI + "Acme_Corp", "a"), ("https://dir.test/acme", "c")))
    record = behaviour_record(episode(*turns, answer="x"), HOP2)
    assert (record.pages_read, record.sites_read) == (3, 2)
    assert record.cross_checked is False and "cross_checked" not in record.tags  # none states the asked fact twice
    blogs = (browse(("https://a.quillblog.net/p", "a"), ("https://b.quillblog.net/p", "b")),)
    assert behaviour_record(episode(*blogs, answer="x"), HOP2).sites_read == 1  # one site, two bloggers


def test_two_pages_read_that_state_the_asked_fact_are_a_cross_check():
    task = {**HOP2, "chain": [HOP2["chain"][0], hop("Ann Lee", "born_in", "Veloria", WIKI + "Ann_Lee",
                                                   WIKI + "Notable_people_from_Veloria")]}
    both = (browse((WIKI + "Ann_Lee", "| Place of birth | Veloria |")),
            browse((WIKI + "Notable_people_from_Veloria", "Ann Lee (born 1901)\nList of notable people from Veloria")))
    record = behaviour_record(episode(*both, answer="Veloria"), task)
    assert record.cross_checked is True and "cross_checked" in record.tags
    one = behaviour_record(episode(both[0], answer="Veloria"), task)
    assert one.cross_checked is False
    assert behaviour_record(episode(*both, answer="cannot find"), task).cross_checked is None  # abstained
    real = (browse(("https://a.test/", "Ann Lee founded it"), ("https://b.test/", "by Ann Lee")),)
    assert behaviour_record(episode(*real, answer="Ann Lee"), REAL).cross_checked is True
    lone = (browse(("https://a.test/", "Ann Lee founded it"), ("https://b.test/", "by someone else")),)
    assert behaviour_record(episode(*lone, answer="Ann Lee"), REAL).cross_checked is False


def test_conflict_read_both_and_believed_the_reliable_page_though_the_contradicting_one_ranked_first():
    turns = (search("Acme Corp founded year", ("Acme Corp", BLOG, "All about Acme Corp"),
                    ("Acme Corp", WIKI + "Acme_Corp", "Acme Corp is an organization")),
             browse((BLOG, "Did you know? Acme Corp was established in 1907."), (WIKI + "Acme_Corp", "| Established | 1901 |")))
    record = behaviour_record(episode(*turns, answer="1901"), CONFLICT)
    assert (record.saw_reliable, record.saw_contradicting, record.believed) == (True, True, "reliable")
    assert (record.read_reliable, record.read_contradicting, record.unreliable_first) == (True, True, True)
    assert record.cross_checked is True and record.grounded is True and "conflict_read_both" in record.tags
    rates = behaviour_rates([record])
    assert rates["conflict_read_both"] == rates["conflict_reliable_when_misled"] == {"rate": 1.0, "n": 1}


def test_conflict_believed_the_contradicting_page_first_in_the_results():
    turns = (search("Acme Corp founded year", ("Acme Corp", BLOG, "blog"), ("Acme Corp", WIKI + "Acme_Corp", "")),
             browse((BLOG, "Did you know? Acme Corp was established in 1907.")))
    record = behaviour_record(episode(*turns, answer="1907"), CONFLICT)
    assert (record.saw_reliable, record.saw_contradicting, record.read_reliable, record.believed) == (
        True, True, False, "contradicting")
    assert record.grounded is True, "a value a page states is grounded, even the wrong page's"
    assert record.cross_checked is False and "believed_contradicting" in record.tags
    rates = behaviour_rates([record])
    assert rates["conflict_reliable_when_misled"] == {"rate": 0.0, "n": 1}
    assert rates["conflict_read_both"] == {"rate": 0.0, "n": 1} and rates["conflict_saw_both"] == {"rate": 1.0, "n": 1}


def test_another_unreliable_post_is_not_the_contradicting_page_and_a_third_value_is_other():
    turns = (search("Acme Corp founded", ("notes", OTHER_BLOG, "Acme Corp founded 1903")),)
    record = behaviour_record(episode(*turns, answer="1903"), CONFLICT)
    assert (record.saw_contradicting, record.believed, record.unreliable_first) == (False, "other", None)
    assert behaviour_record(episode(*turns, answer="1903"), HOP2).believed is None  # not a conflict task


# ---------------------------------------------------------------------------------------------- reflection

NOTHING = ("Zed", "https://zed.test/", "unrelated")


def test_a_new_query_after_a_search_without_evidence_is_reflection():
    turns = (search("Acme founder", NOTHING), search("Acme Corp founded by", ("Acme", WIKI + "Acme_Corp", "")))
    record = behaviour_record(episode(*turns, answer="Ann Lee"), HOP2)
    assert (record.empty_search, record.reaction) == (True, "new_query") and "reflected" in record.tags


def test_the_same_query_again_or_answering_right_away_is_not_reflection():
    repeat = behaviour_record(episode(search("Acme founder", NOTHING), search("acme  Founder", NOTHING),
                                      answer="x"), HOP2)
    assert repeat.reaction == "same_query" and repeat.repeated_calls == 1 and "no_reflection" in repeat.tags
    hasty = behaviour_record(episode(search("Acme founder", NOTHING), answer="x"), HOP2)
    assert hasty.reaction == "answered"
    assert behaviour_record(episode(search("Acme founder", NOTHING), answer=None), HOP2).reaction == "ended"


def test_a_search_that_found_evidence_asks_for_no_reflection():
    record = behaviour_record(episode(search("Acme", ("Acme", WIKI + "Acme_Corp", "")), answer="x"), HOP2)
    assert (record.empty_search, record.reaction, record.repeated_calls) == (False, None, 0)


def test_real_questions_call_a_search_empty_when_no_gold_is_in_its_results():
    task = {"type": "hotpotqa", "golds": ["Paris"], "answerable": True}
    found = behaviour_record(episode(search("capital", ("France", "https://f.test", "Paris is the capital")),
                                     answer="Paris"), task)
    assert found.empty_search is False and found.world is False
    missed = behaviour_record(episode(search("capital", NOTHING), search("capital of France", NOTHING),
                                      answer="Lyon"), task)
    assert missed.reaction == "new_query"


# ---------------------------------------------------------------------------------------------- honesty


def test_abstention_precision_and_recall():
    unanswerable = {"type": "unanswerable", "golds": ["cannot find"], "answerable": False}
    records = [
        behaviour_record(episode(answer="I cannot find the answer."), unanswerable),  # true abstention
        behaviour_record(episode(answer="1950"), unanswerable),  # missed: guessed
        behaviour_record(episode(answer="cannot find"), HOP2),  # false abstention
        behaviour_record(episode(answer="Veloria"), HOP2),
    ]
    assert [r.abstained for r in records] == [True, False, True, False]
    rates = behaviour_rates(records)
    assert rates["abstention_precision"] == {"rate": 0.5, "n": 2}
    assert rates["abstention_recall"] == {"rate": 0.5, "n": 2}


def test_answerability_comes_from_the_golds_when_the_task_does_not_say():
    assert TaskLabels.from_task({"golds": ["cannot find"]}).answerable is False
    assert TaskLabels.from_task({"golds": ["Paris"]}).answerable is True


# ---------------------------------------------------------------------------------------------- planning

HIT = ("x", "https://x.test/", "")


@pytest.mark.parametrize(("queries", "plan"), [
    (["Acme Corp founder", "Ann Lee birthplace"], "in_order"),
    (["Ann Lee birthplace", "Acme Corp founder"], "out_of_order"),
    (["Acme Corp founder", "founder birthplace"], "skipped"),
    ([], "no_search"),
])
def test_hop_queries_follow_the_chain_in_order_or_not(queries, plan):
    record = behaviour_record(episode(*(search(q, HIT) for q in queries), answer="Veloria"), HOP2)
    assert record.plan == plan


def test_planning_is_measured_on_hop2_and_hop3_world_tasks_only():
    assert behaviour_record(episode(search("Acme Corp", HIT), answer="1901"), CONFLICT).plan is None


def test_real_questions_plan_by_chaining_a_name_read_in_the_results():
    task = {"type": "hotpotqa", "golds": ["Veloria"]}
    question = "Where was the founder of Acme born?"
    chained = episode(search("Acme founder", ("Acme", "https://a.test", "Acme was founded by Ann Lee")),
                      search("Ann Lee birthplace", HIT), answer="Veloria", question=question)
    assert behaviour_record(chained, task).plan == "chained"
    guessed = episode(search("Acme founder", HIT), search("Bob Stone birthplace", HIT), answer="x", question=question)
    assert behaviour_record(guessed, task).plan == "unchained"
    assert behaviour_record(episode(search("Acme founder", HIT), answer="x", question=question), task).plan == "single"


# ---------------------------------------------------------------------------------------------- aggregation


def test_rates_count_their_cases_and_say_none_without_any():
    grounded = episode(browse((WIKI + "Ann_Lee", "Veloria")), answer="Veloria")
    rates = behaviour_rates([behaviour_record(grounded, HOP2), behaviour_record(episode(answer="Zed"), HOP2),
                             behaviour_record(episode(answer=None), HOP2)])
    assert rates["episodes"]["n"] == 3
    assert rates["grounded"] == {"rate": 0.5, "n": 2} and rates["unsupported"] == {"rate": 0.5, "n": 2}
    assert rates["pages_per_answer"] == {"rate": 0.5, "n": 2}
    assert rates["conflict_saw_both"] == {"rate": None, "n": 0}
    flat = flat_rates(rates)
    assert flat["behaviour/grounded"] == 0.5 and flat["behaviour/grounded_n"] == 2.0
    assert math.isnan(flat["behaviour/conflict_saw_both"]) and "behaviour/episodes" not in flat


def test_rates_by_type_group_then_all_and_rows_show_rate_and_cases():
    records = [behaviour_record(episode(answer="Veloria"), HOP2), behaviour_record(episode(answer="1907"), CONFLICT)]
    groups = rates_by_type(r.to_dict() for r in records)
    assert list(groups) == ["conflict", "hop2", "all"]
    assert groups["all"]["episodes"]["n"] == 2
    rows = behaviour_rows(groups, label="type")
    assert rows[1]["type"] == "hop2" and rows[1]["grounded"] == "0% (1)" and rows[1]["conflict: saw both"] == "—"
    assert "judge agrees" not in rows[0]


def test_the_judges_agreement_with_the_rule():
    records = [{**behaviour_record(episode(answer="Zed"), HOP2).to_dict(), "judged_grounded": False},
               {**behaviour_record(episode(answer="Zed"), HOP2).to_dict(), "judged_grounded": True}]
    rates = behaviour_rates(records)
    assert rates["judge_agreement"] == {"rate": 0.5, "n": 2}
    assert behaviour_rows({"all": rates})[0]["judge agrees"] == "50% (2)"


def test_a_qatask_gives_its_labels_from_its_metadata():
    from deepresearcher.data import QATask

    task = QATask(id="w1", source="world", question="q?", golds=["Veloria"],
                  metadata={"type": "hop2", "answerable": True, "evidence_urls": HOP2["evidence_urls"],
                            "chain": HOP2["chain"]})
    labels = TaskLabels.from_task(task)
    assert (labels.type, labels.world, len(labels.chain)) == ("hop2", True, 2)


def test_an_observation_kept_only_as_text_still_grounds_and_names_its_queries():
    """Records that kept the observation as the policy read it (no raw result) are read from that text."""
    call = ToolCallRecord(name="web_search", arguments={"query": ["Acme Corp founder"]},
                          text="search: Acme Corp founder\n1. Acme Corp | https://x.test | founded by Ann Lee")
    record = behaviour_record(episode(TurnRecord(text="", tool_call=call), answer="Ann Lee"),
                              {**REAL, "type": "hop2", "evidence_urls": HOP2["evidence_urls"], "chain": HOP2["chain"],
                               "golds": ["Veloria"]})
    assert record.grounded is False, "the world grounds on the pages it knows, which a text-only record does not name"
    record = behaviour_record(episode(TurnRecord(text="", tool_call=call), answer="Ann Lee"), HOP2)
    assert record.plan == "skipped"  # Ann Lee, hop 2's subject, was never searched
    real = behaviour_record(episode(TurnRecord(text="", tool_call=call), answer="Ann Lee"), REAL)
    assert real.grounded is True


# ---------------------------------------------------------------------------------------------- two-entity steps

COMPARISON = {"id": "k1", "type": "comparison", "question": "Which organization was founded earlier, Acme Corp or Zenith Ltd?",
              "golds": ["Acme Corp"], "answerable": True, "evidence_urls": [WIKI + "Acme_Corp", WIKI + "Zenith_Ltd"],
              "chain": [hop("Acme Corp", "founded_year", "1901", WIKI + "Acme_Corp"),
                        hop("Zenith Ltd", "founded_year", "1950", WIKI + "Zenith_Ltd")]}


def test_a_comparison_that_searched_and_read_both_entities_and_answered_right_counts_every_step():
    turns = (search("Acme Corp founded", ("Acme Corp", WIKI + "Acme_Corp", "A company.")),
             search("Zenith Ltd founded", ("Zenith Ltd", WIKI + "Zenith_Ltd", "A firm.")),
             browse((WIKI + "Acme_Corp", "| Founded | 1901 |")), browse((WIKI + "Zenith_Ltd", "| Founded | 1950 |")),
             TurnRecord(text="<think>Acme Corp 1901, Zenith Ltd 1950.</think>\n<answer>Acme Corp</answer>"))
    record = behaviour_record(episode(*turns, answer="Acme Corp"), COMPARISON)
    assert (record.entities_searched, record.entities_read, record.correct) == (2, 2, True)
    assert record.values_stated == [True, True] and "entity_not_searched" not in record.tags
    rates = behaviour_rates([record])
    assert rates["both_entities_searched"] == rates["both_pages_read"] == rates["right_when_both_read"] == {"rate": 1.0, "n": 1}
    assert rates["first_value_stated"] == rates["second_value_stated"] == {"rate": 1.0, "n": 1}


def test_a_garbled_second_name_is_a_missed_search_and_a_wrong_pick_after_reading_both_is_the_comparison_step():
    garbled = (search("Acme Corp founded", ("Acme Corp", WIKI + "Acme_Corp", "A company.")),
               browse((WIKI + "Acme_Corp", "| Founded | 1901 |")),
               search("Zenith Mirror founded", ("Zenith Mirror", WIKI + "Zenith_Mirror", "A film.")))
    missed = behaviour_record(episode(*garbled, answer="Acme Corp"), COMPARISON)
    assert (missed.entities_searched, missed.entities_read) == (1, 1) and "entity_not_searched" in missed.tags
    read_both = (search("Acme Corp founded", ("Acme Corp", WIKI + "Acme_Corp", "A company.")),
                 browse((WIKI + "Acme_Corp", "| Founded | 1901 |")),
                 search("Zenith Ltd founded", ("Zenith Ltd", WIKI + "Zenith_Ltd", "A firm.")),
                 browse((WIKI + "Zenith_Ltd", "| Founded | 1950 |")))
    miscopied = TurnRecord(text="<think>Acme Corp 1987, Zenith Ltd 1950.</think>\n<answer>Zenith Ltd</answer>")
    wrong = behaviour_record(episode(*read_both, miscopied, answer="Zenith Ltd"), COMPARISON)
    assert (wrong.entities_searched, wrong.entities_read, wrong.correct) == (2, 2, False)
    assert wrong.values_stated == [False, True]
    rates = behaviour_rates([missed, wrong])
    assert rates["both_entities_searched"] == {"rate": 0.5, "n": 2}
    assert rates["both_pages_read"] == {"rate": 0.5, "n": 2}
    assert rates["right_when_both_read"] == {"rate": 0.0, "n": 1}
    assert (rates["first_value_stated"], rates["second_value_stated"]) == ({"rate": 0.0, "n": 1}, {"rate": 1.0, "n": 1})


def test_two_entity_steps_apply_only_to_two_entity_world_tasks():
    turns = (search("Acme Corp founder", ("Acme Corp", WIKI + "Acme_Corp", "A company.")),)
    record = behaviour_record(episode(*turns, answer="Ann Lee"), HOP2)
    assert (record.entities_searched, record.entities_read, record.correct) == (None, None, None)
    assert behaviour_rates([record])["both_pages_read"] == {"rate": None, "n": 0}


def test_values_stated_are_measured_only_where_the_last_turn_writes_values_out():
    read_both = (browse((WIKI + "Acme_Corp", "| Founded | 1901 |")), browse((WIKI + "Zenith_Ltd", "| Founded | 1950 |")))
    plain = TurnRecord(text="<think>The sources give Acme Corp.</think>\n<answer>Acme Corp</answer>")
    record = behaviour_record(episode(*read_both, plain, answer="Acme Corp"), COMPARISON)
    assert record.values_stated is None and record.entities_read == 2
    assert behaviour_rates([record])["first_value_stated"] == {"rate": None, "n": 0}


def test_a_comparison_is_grounded_when_the_values_read_give_its_answer_and_a_yes_no_likewise():
    read_both = (browse((WIKI + "Acme_Corp", "| Founded | 1901 |")), browse((WIKI + "Zenith_Ltd", "| Founded | 1950 |")))
    assert behaviour_record(episode(*read_both, answer="Acme Corp"), COMPARISON).grounded is True
    assert behaviour_record(episode(*read_both, answer="Zenith Ltd"), COMPARISON).grounded is False  # read, then flipped
    one = behaviour_record(episode(read_both[0], answer="Acme Corp"), COMPARISON)
    assert one.grounded is False, "one value read cannot give a comparison's answer"
    two_page = {"id": "y1", "type": "two_page", "question": "Were Ann Lee and Bo Wu born in the same city?",
                "golds": ["no"], "answerable": True, "evidence_urls": [WIKI + "Ann_Lee", WIKI + "Bo_Wu"],
                "chain": [hop("Ann Lee", "born_in", "Veloria", WIKI + "Ann_Lee"), hop("Bo Wu", "born_in", "Kesk", WIKI + "Bo_Wu")]}
    pages = (browse((WIKI + "Ann_Lee", "| Place of birth | Veloria |")), browse((WIKI + "Bo_Wu", "| Place of birth | Kesk |")))
    assert behaviour_record(episode(*pages, answer="no"), two_page).grounded is True
    assert behaviour_record(episode(*pages, answer="yes"), two_page).grounded is False
    assert behaviour_record(episode(answer="no"), two_page).grounded is False, "a yes/no answer with nothing read"


def test_a_rate_that_reads_the_same_on_every_source_with_enough_cases_is_stuck():
    from deepresearcher.eval.behaviours import stuck_rates

    def rates(**values):
        return {name: {"rate": rate, "n": n} for name, (rate, n) in values.items()}

    sources = {"oracle": rates(grounded=(1.0, 30), cross_checked=(0.0, 30), reflected=(0.0, 5), repeated_calls=(0.0, 30)),
               "model": rates(grounded=(0.9, 40), cross_checked=(0.0, 40), reflected=(1.0, 25), repeated_calls=(0.0, 40)),
               "baseline": rates(grounded=(0.0, 40), cross_checked=(None, 0), reflected=(1.0, 3), repeated_calls=(0.0, 40))}
    assert stuck_rates(sources) == {"cross_checked": "0%", "reflected": "100%"}
