"""The web admin in headless Chromium against the real service (gunicorn +
pumper + notifier on PostgreSQL + Redis): one operator's session, step by step.
Each step saves a screenshot under test-artifacts/."""
from __future__ import annotations

import re
import time

import pytest
import requests

from tests.browser.conftest import LiveService
from tests.receiver import Receiver, Reply

pytestmark = pytest.mark.browser

NS = "shop"


def admin_auth(service: LiveService) -> tuple[str, str]:
    return service.admin_user, service.admin_password


def wait_for(condition, timeout_s: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def api_token(live_service) -> str:
    """A token minted through lmstfy's admin route (the page's own token is tested separately)."""
    answer = requests.post(f"{live_service.url}/token/{NS}", params={"description": "browser tests"},
                           auth=admin_auth(live_service), timeout=10)
    assert answer.status_code == 201, answer.text
    return answer.json()["token"]


@pytest.fixture(scope="module")
def receiver():
    server = Receiver().start()
    yield server
    server.stop()


def api(service: LiveService, method: str, path: str, token: str, **kwargs) -> requests.Response:
    return requests.request(method, f"{service.url}/api/{NS}/{path}", headers={"X-Token": token}, timeout=10,
                            **kwargs)


def message(page) -> str:
    return page.locator("ul.messagelist").inner_text()


def test_the_admin_index_leads_to_the_dashboard(page, shoot, api_token):
    page.goto("/admin/")
    page.click("#queues-dashboard-link >> text=Queues dashboard")
    page.wait_for_url("**/admin/queues/")
    assert page.locator("#pools").inner_text().count("Redis version") == 1
    shoot("admin-index-to-overview")


def test_a_new_token_is_shown_once(page, shoot, live_service, api_token):
    page.goto(f"/admin/queues/ns/{NS}/")
    page.fill("#new-token input[name=description]", "created in the browser")
    page.click("#new-token input[type=submit]")
    page.wait_for_url(re.compile(r".*/tokens/\d+/created/$"))
    plain = page.locator("#token-value").inner_text().strip()
    assert len(plain) == 26
    shoot("token-created")
    assert api(live_service, "PUT", "from-browser-token", plain, data=b"hi").status_code == 201
    page.reload()
    assert page.locator("#token-hidden").is_visible()
    assert plain not in page.content()
    page.goto(f"/admin/queues/ns/{NS}/")
    assert "created in the browser" in page.locator("#tokens").inner_text()
    shoot("namespace")
    page.locator("#tokens tr", has_text="created in the browser").locator("text=set").click()
    page.fill("#id_read", "100")
    page.fill("#id_write", "50")
    page.fill("#id_interval", "10")
    shoot("token-limit")
    page.click("input[type=submit][value='Save limit']")
    assert "100 reads, 50 writes / 10 s" in page.locator("#tokens").inner_text()


def test_published_jobs_show_in_the_counts_and_the_histogram(page, shoot, live_service, api_token):
    for i in range(3):
        assert api(live_service, "PUT", "emails", api_token, data=b'{"n": %d}' % i).status_code == 201
    for delay in (3 * 3600, 3 * 3600 + 60, 7 * 3600, 30 * 3600, 50 * 3600):
        assert api(live_service, "PUT", f"emails?delay={delay}&ttl=0", api_token, data=b"later").status_code == 201
    page.goto(f"/admin/queues/ns/{NS}/q/emails/")
    assert page.locator("#count-ready").inner_text() == "3"
    assert page.locator("#count-delayed").inner_text() == "5"
    assert page.locator("#due svg rect.bar").count() >= 4
    assert '{"n": 0}' in page.locator("#ready").inner_text()
    shoot("queue")
    page.locator("#ready tbody a").first.click()
    assert page.locator("pre.body").inner_text() == '{"n": 0}'
    shoot("job")
    page.goto("/admin/queues/")
    row = page.locator("#queues tr", has_text="emails")
    assert "3" in row.inner_text()


def test_pause_makes_consume_answer_paused_until_resume(page, shoot, live_service, api_token):
    page.goto(f"/admin/queues/ns/{NS}/q/emails/")
    page.click("#pause")
    page.wait_for_selector("#resume")
    assert "Paused" in message(page)
    assert "by browser-admin" in page.locator("#state").inner_text()
    shoot("queue-paused")
    paused = api(live_service, "GET", "emails?ttr=30", api_token)
    assert paused.status_code == 404 and paused.headers.get("X-Queue-Paused") == "1"
    assert paused.json() == {"msg": "no job available"}
    page.click("#resume")
    page.wait_for_selector("#pause")
    consumed = api(live_service, "GET", "emails?ttr=30", api_token)
    assert consumed.status_code == 200, consumed.text
    assert api(live_service, "DELETE", f"emails/job/{consumed.json()['job_id']}", api_token).status_code == 204


def test_dead_jobs_are_respawned_from_the_page(page, shoot, live_service, api_token):
    for i in range(3):
        assert api(live_service, "PUT", "payments?tries=1", api_token, data=b"charge %d" % i).status_code == 201
    leased = api(live_service, "GET", "payments?ttr=1&count=3", api_token)
    assert leased.status_code == 200 and len(leased.json()) == 3
    wait_for(lambda: api(live_service, "GET", "payments/deadletter/size", api_token)
             .json()["size"] == 3, what="the pumper to dead-letter three jobs")
    page.goto(f"/admin/queues/ns/{NS}/q/payments/")
    assert page.locator("#count-dead").inner_text() == "3"
    assert page.locator("#deadletter tbody tr").count() == 3
    shoot("queue-dead-letter")
    page.locator("#deadletter input[name=ids]").first.check()
    page.click("#respawn-selected")
    page.wait_for_url(re.compile(r".*/dead/respawn/\?ids=.*"))
    assert "Respawn 1 dead job of shop/payments?" in page.locator("#content").inner_text()
    assert page.locator("#id_ttl").input_value() == "86400"
    shoot("confirm-respawn")
    page.click("#confirm")
    page.wait_for_url(re.compile(r".*/q/payments/(\?.*)?(#deadletter)?$"))
    assert "Respawned 1 dead job(s)" in message(page)
    assert page.locator("#count-dead").inner_text() == "2"
    page.click("#respawn-all")
    page.click("#confirm")
    assert "Respawned 2 dead job(s)" in message(page)
    assert page.locator("#count-dead").inner_text() == "0"
    assert page.locator("#count-ready").inner_text() == "3"


def test_a_topic_is_created_after_fixing_an_invalid_expression(page, shoot, receiver):
    page.goto("/admin/queues/topics/")
    assert "No topics yet" in page.locator("#content").inner_text()
    page.click("#new-topic")
    page.wait_for_url("**/admin/queues/topics/new/")
    page.goto(f"/admin/queues/topics/new/?ns={NS}&queue=hooks")
    page.fill("#id_callback_url", receiver.url("/hook"))
    page.fill("#id_retry_expression", "{status} >")
    page.wait_for_selector("#expression-check.bad")                     # live check, through fetch()
    assert "position" in page.locator("#expression-check").inner_text()
    page.click("#save-topic")
    page.wait_for_selector(".field-retry_expression .errorlist")       # the server's inline error
    assert "position" in page.locator(".field-retry_expression .errorlist").inner_text()
    shoot("topic-invalid-expression")
    page.fill("#id_retry_expression", "{res.code} != 0")
    page.wait_for_selector("#expression-check.ok")
    page.click("#save-topic")
    page.wait_for_url(re.compile(r".*/admin/queues/topics/\d+/$"))
    assert "created" in message(page)
    topic_url = page.url
    page.goto("/admin/queues/topics/")
    assert "shop/hooks" in page.locator("#content").inner_text()
    shoot("topics")
    page.goto(topic_url)


def test_a_test_delivery_reaches_the_receiver_and_the_attempt_log(page, shoot, receiver):
    assert re.search(r"/admin/queues/topics/\d+/$", page.url)
    receiver.always(Reply.json({"code": 0}))      # {res.code} != 0 is false: a success
    page.click("#send-test")
    page.wait_for_selector("#attempts tbody tr")
    [request] = receiver.wait_for(1)
    job_id = request.header("webhook-id")
    assert job_id.startswith("test_")
    assert job_id in page.locator("#attempts").inner_text()
    assert page.locator("#success-rate").inner_text() == "100.0 %"
    page.fill("#id_job_id", "no-such-job")
    page.click("#attempts input[type=submit]")
    assert "No attempt matches" in page.locator("#attempts").inner_text()
    page.fill("#id_job_id", job_id)
    page.click("#attempts input[type=submit]")
    assert page.locator("#attempts tbody tr").count() == 1
    page.fill("#tester textarea[name=body]", '{"code": 3}')
    page.click("#run-tester")
    assert "true" in page.locator("#verdict").inner_text()
    shoot("topic")


def test_the_overview_shows_all_of_it(page, shoot):
    page.goto("/admin/queues/")
    queues = page.locator("#queues").inner_text()
    for name in ("emails", "payments", "from-browser-token"):
        assert name in queues
    shoot("overview")
