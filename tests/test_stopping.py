"""The CLI's one stop handler (``ortop.cli.stopping``): a signal sets the stop event and is remembered; with
``second_aborts`` a second one raises KeyboardInterrupt; the old handlers come back however the block ends; off the
main thread nothing is installed. Real signals, sent to this process."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from ortop.cli.stopping import stop_on_signals


def test_a_signal_sets_the_event_and_is_remembered_and_the_old_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals() as stopping:
        assert not stopping.event.is_set() and not stopping.signalled
        os.kill(os.getpid(), signal.SIGTERM)
        assert stopping.event.wait(5)
        assert stopping.signum == signal.SIGTERM and stopping.signalled
        os.kill(os.getpid(), signal.SIGTERM)  # a second one, without second_aborts: still only a stop
        assert stopping.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_signal_aborts_when_asked_and_the_handlers_are_restored_on_the_way_out() -> None:
    before = signal.getsignal(signal.SIGINT)
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with stop_on_signals(second_aborts=True, on_stop=lambda: said.append("stopping")) as stopping:
            os.kill(os.getpid(), signal.SIGINT)
            assert stopping.event.wait(5) and said == ["stopping"]
            os.kill(os.getpid(), signal.SIGINT)
            stopping.event.wait(5)  # the handler runs between bytecodes: the interrupt lands here at the latest
            threading.Event().wait(1)
    assert signal.getsignal(signal.SIGINT) is before


def test_the_event_given_is_the_one_set_and_off_the_main_thread_nothing_is_installed() -> None:
    mine = threading.Event()
    with stop_on_signals(mine, signals=(signal.SIGUSR1,)) as stopping:
        assert stopping.event is mine
        os.kill(os.getpid(), signal.SIGUSR1)
        assert mine.wait(5)
    seen: list[object] = []

    def off_main() -> None:
        with stop_on_signals(signals=(signal.SIGUSR2,)) as s:
            seen.append(signal.getsignal(signal.SIGUSR2))
            seen.append(s.event)

    before = signal.getsignal(signal.SIGUSR2)
    t = threading.Thread(target=off_main)
    t.start()
    t.join(5)
    assert seen[0] is before and isinstance(seen[1], threading.Event)
