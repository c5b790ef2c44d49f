"""The calibration node's client (shadow_twin/ros/calibration_client.py request_calibration, as
calibrate-live and demo call it) against a fake node that loses answers: a lost answer is sent
again and the run going on followed; with the node's status, a run the lost request started is
followed, never started a second time."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)


def test_a_request_whose_answer_is_lost_is_sent_again_and_follows_the_run():
    """request_calibration (calibrate-live, demo): the first answer lost (as rmw_fastrtps drops an
    answer to a client whose response reader it has not matched yet), the repeat finds the run going
    on: that run is followed; a node busy with a run from the first request is not."""
    pytest.importorskip('std_srvs.srv')
    from rclpy.task import Future
    from std_srvs.srv import Trigger
    from shadow_twin.ros.calibration_client import going_on_message, request_calibration, run_dir_of

    busy = Trigger.Response(success=False, message=going_on_message('/runs/7', 'recording', 'executing a (1/2)'))

    class FakeNode:
        def __init__(self, answers):
            self.answers, self.calls = list(answers), 0

        def create_client(self, srv_type, name):
            return self

        def wait_for_service(self, timeout_sec):
            return True

        def call_async(self, request):
            self.calls += 1
            future, answer = Future(), self.answers.pop(0)
            if answer is not None:
                future.set_result(answer)
            return future
    lines = []
    node = FakeNode([None, busy])
    answer = request_calibration(node, '/calibration_node', 1.0, answer_timeout=0.05, out=lines.append)
    assert node.calls == 2 and answer.success and run_dir_of(answer) == '/runs/7', answer
    assert lines == ['/calibration_node/calibrate: 1 request(s) got no answer; following the run going on']
    answer = request_calibration(FakeNode([busy]), '/calibration_node', 1.0, answer_timeout=0.05)
    assert not answer.success and answer.message == busy.message
    with pytest.raises(Exception, match='did not answer 3 request'):
        request_calibration(FakeNode([None] * 3), '/calibration_node', 1.0, answer_timeout=0.01)


def test_a_lost_answer_whose_run_started_is_not_sent_again():
    """request_calibration with the node's ~/status: the first answer lost, the status shows the run
    it started (here already done, as an offline run on a fast PC can be before the answer times out):
    no second request (it would start a second calibration and install it), the run is followed; a
    lost answer with no run started is sent again."""
    pytest.importorskip('std_srvs.srv')
    from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
    from rclpy.task import Future
    from shadow_twin.ros.calibration_client import StatusFollower, request_calibration, run_dir_of

    def status(phase, run_dir=None):
        values = [KeyValue(key='phase', value=phase)] + ([KeyValue(key='run_dir', value=run_dir)] if run_dir else [])
        return DiagnosticStatus(message=f'{phase} message', values=values)

    class FakeNode:
        """A service that loses every answer; a request runs ``runs`` (statuses) on the node."""
        def __init__(self, runs):
            self.runs, self.calls, self.on_status = list(runs), 0, None

        def create_client(self, srv_type, name):
            return self

        def create_subscription(self, msg_type, topic, callback, qos):
            self.on_status = callback
            callback(status('done', '/runs/6'))           # the latched status of an earlier run

        def wait_for_service(self, timeout_sec):
            return True

        def call_async(self, request):
            self.calls += 1
            for msg in self.runs.pop(0):
                self.on_status(msg)
            return Future()
    node, lines = FakeNode([[status('starting', '/runs/7'), status('calibrating', '/runs/7'),
                             status('done', '/runs/7')]]), []
    answer = request_calibration(node, '/calibration_node', 1.0, answer_timeout=0.05, out=lines.append,
                                 follower=StatusFollower(node, '/calibration_node'))
    assert node.calls == 1 and answer.success and run_dir_of(answer) == '/runs/7', answer
    assert lines == ['/calibration_node/calibrate: 1 request(s) got no answer; following the run they started']
    node = FakeNode([[], [status('calibrating', '/runs/6')], []])    # no run started: a status of another run
    with pytest.raises(Exception, match='did not answer 3 request'):
        request_calibration(node, '/calibration_node', 1.0, answer_timeout=0.01,
                            follower=StatusFollower(node, '/calibration_node'))
    assert node.calls == 3
