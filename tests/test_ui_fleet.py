"""The dashboard on a fleet (``specterm attach`` of several servers, and the replay of its recording):
the replicas list with each replica's figures, the requests list labelled and narrowed by replica.

The events are a real attach session's (``sample_sessions/attach_vllm_serve.jsonl``, one ``vllm serve``)
with its requests dealt to two replicas as a fleet attach labels them (``RequestStarted.replica`` and a
``ReplicaSeen`` per scheduler); the labelling itself, on real sockets and servers, is
``tests/test_fleet.py``'s and ``tests/test_attach.py``'s."""

from __future__ import annotations

import asyncio

from test_ui_app import until
from test_ui_attach import SAMPLE, apply
from test_ui_snapshots import attached

from specterm.events import ReplicaSeen, RequestStarted, dump_event
from specterm.session.reader import read_session
from specterm.ui.app import make_app
from specterm.ui.widgets.fleet_list import ALL, FleetList
from specterm.ui.widgets.request_list import FOLLOW, RequestList


def fleet_events() -> list:
    data = read_session(SAMPLE)
    spec = data.header.models
    seen = [
        ReplicaSeen(replica=name, addr=f"ipc:///run/{name[0]}.sock", model="SmolLM2", speculation=spec_, pid=pid)
        for name, spec_, pid in (
            ("a·0", {"method": spec.get("method"), "num_speculative_tokens": spec.get("num_speculative_tokens")}, 11),
            ("b·0", None, 22),
        )
    ]
    out, n = [data.header, *seen], 0
    for ev in data.events:
        if isinstance(ev, RequestStarted):
            ev = ev.model_copy(update={"replica": "a·0" if n % 2 == 0 else "b·0"})
            n += 1
        out.append(ev)
    return out


def rows(widget) -> list[str]:
    return [widget.get_option_at_index(i).prompt for i in range(widget.option_count)]


def test_replicas_side_by_side_and_picking_one_narrows_the_requests():
    events = fleet_events()
    labels = {e.request_id: e.replica for e in events if isinstance(e, RequestStarted)}

    async def main():
        app = attached((160, 48))
        async with app.run_test(size=(160, 48)) as pilot:
            await apply(pilot, events)
            fleet, requests = app.query_one(FleetList), app.query_one(RequestList)
            fleet.sync(force=True)
            assert fleet.display
            summary = app.state.summary
            a = summary.replicas["a·0"].session
            shown = rows(fleet)
            assert shown[0].endswith("all replicas") and len(shown) == 3
            assert shown[1].startswith(f"a·0 k{summary.replica_seen['a·0'].speculation['num_speculative_tokens']} ")
            assert f" {100 * a.acceptance_rate:.0f}% {a.mean_acceptance_length:.1f} " in shown[1]
            assert fleet.border_title == "replicas: k acc len tok/s weights/tok"
            assert shown[2].startswith("b·0 k0 ")
            # every request row says which replica ran it
            for i in range(1, requests.option_count):
                rid = requests.get_option_at_index(i).id
                assert str(requests.get_option_at_index(i).prompt).startswith(labels[rid] + " ")
            # drill down: b·0's requests only, then all again
            fleet.focus()
            fleet.highlighted = 2
            await pilot.press("enter")
            await until(pilot, lambda: app.state.replica_filter == "b·0")
            ids = [requests.get_option_at_index(i).id for i in range(requests.option_count)]
            assert ids[0] == FOLLOW and {labels[r] for r in ids[1:]} == {"b·0"}
            assert len(ids) - 1 == sum(1 for r in labels.values() if r == "b·0")
            assert requests.border_title == "requests of b·0"
            fleet.highlighted = 0
            assert fleet.get_option_at_index(0).id == ALL
            await pilot.press("enter")
            await until(pilot, lambda: app.state.replica_filter is None)
            assert requests.option_count == len(labels) + 1

    asyncio.run(main())


def test_one_server_shows_no_replicas_list_and_no_replica_column():
    data = read_session(SAMPLE)
    events = [data.header, ReplicaSeen(replica="r1·0", addr="ipc:///run/v.sock")]
    events += [e.model_copy(update={"replica": "r1·0"}) if isinstance(e, RequestStarted) else e for e in data.events]

    async def main():
        app = attached((80, 24))
        async with app.run_test(size=(80, 24)) as pilot:
            await apply(pilot, events)
            assert not app.query_one(FleetList).display
            assert not any("r1·0" in str(p) for p in rows(app.query_one(RequestList)))

    asyncio.run(main())


def test_the_replay_of_a_fleet_recording_shows_the_same_lists(tmp_path):
    events = fleet_events()
    recording = tmp_path / "fleet.jsonl"
    recording.write_text("".join(dump_event(e) + "\n" for e in events))

    async def main():
        app = make_app(replay=str(recording), theme_dirs=(), deterministic=True)
        async with app.run_test(size=(160, 48)) as pilot:
            app.replayer.jump_to_end()
            requests = app.query_one(RequestList)
            await until(pilot, lambda: requests.option_count == 5)
            fleet = app.query_one(FleetList)
            fleet.sync(force=True)
            assert fleet.display and len(rows(fleet)) == 3

    asyncio.run(main())


def test_replay_summary_of_a_fleet_recording_lists_each_replica(tmp_path, capsys):
    import json

    from specterm.cli import main

    events = fleet_events()
    recording = tmp_path / "fleet.jsonl"
    recording.write_text("".join(dump_event(e) + "\n" for e in events))
    assert main(["replay", str(recording), "--summary", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    replicas = figures["replicas"]
    assert set(replicas) == {"a·0", "b·0"}
    assert sum(r["tokens"] for r in replicas.values()) == figures["session"]["tokens"]
    assert sum(r["requests"] for r in replicas.values()) == len(figures["requests"])
    assert main(["replay", str(recording), "--summary"]) == 0
    text = capsys.readouterr().out
    a = replicas["a·0"]
    assert f"a·0: {a['requests']} requests, acceptance {100 * a['acceptance_rate']:.1f}%" in text
