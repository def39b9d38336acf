#!/usr/bin/env python3
"""The chat page at / in a real browser: headless Chromium driven by Selenium against `qwenrt serve`
with the demo model on 127.0.0.1. Loads the page (offline: every resource from the server), sends a
message and reads the streamed answer (the same as the API's whole answer for the same settings),
stops a long answer (the server frees the sequence), shows tool calls, starts a new chat, and keeps a
screenshot in $QWENRT_TEST_OUTPUT_DIR (default: the working directory).

Exits 77 (CTest: skipped) when chromium, chromedriver or selenium are missing, except under CI
(CI set), where scripts/setup.sh installs them and their absence is a failure.

    QWENRT_CLI=build/rel/qwenrt python3 tests/server/test_chat_page.py
"""
import json
import os
import shutil
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import Server  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    missing = [name for name, path in (("chromium", CHROMIUM), ("chromedriver", DRIVER)) if not path]
except ImportError:
    missing = ["selenium (pip install -r tests/server/requirements.txt)"]
if missing:
    print(f"{'FAIL' if os.environ.get('CI') else 'skipping'}: {', '.join(missing)} not installed (scripts/setup.sh installs them)")
    sys.exit(1 if os.environ.get("CI") else 77)

OUT = os.environ.get("QWENRT_TEST_OUTPUT_DIR", os.getcwd())


def make_driver():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900",
                "--no-first-run", "--disable-extensions", "--disable-background-networking"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)


class ChatPageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-seqs", "4")
        cls.driver = make_driver()
        cls.driver.set_page_load_timeout(30)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.driver.quit()
        finally:
            cls.server.stop()

    def setUp(self):
        self.driver.get(self.server.url + "/")
        self.wait = WebDriverWait(self.driver, 60)
        self.driver.execute_script("localStorage.clear()")
        self.driver.refresh()

    def el(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def set_field(self, element_id, value):
        # Through the DOM and a change event, as a user edit would end.
        self.driver.execute_script(
            "const e = document.getElementById(arguments[0]); e.value = arguments[1]; e.dispatchEvent(new Event('change'));", element_id,
            str(value))

    def open_settings(self):
        if self.el("#settings").get_attribute("hidden") is not None:
            self.el("#toggle-settings").click()

    def send(self, text):
        box = self.el("#input")
        box.clear()
        box.send_keys(text)
        self.el("#send").click()

    def last_answer(self):
        return self.driver.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1]

    def state(self):
        answers = self.driver.find_elements(By.CSS_SELECTOR, ".msg.assistant")
        return answers[-1].get_attribute("data-state") if answers else None

    def text_of(self, element, css):
        # textContent: the reasoning block is collapsed, so not visible text.
        return element.find_element(By.CSS_SELECTOR, css).get_attribute("textContent")

    def test_page_is_served_offline(self):
        self.assertEqual(self.driver.title, "qwenrt chat")
        status, body, headers = self.server.request("GET", "/")
        self.assertEqual(status, 200)
        self.assertIn("text/html", headers["Content-Type"])
        self.assertIn("default-src 'self'", headers["Content-Security-Policy"])
        for path, mime in (("/chat.js", "text/javascript"), ("/chat.css", "text/css")):
            status, _, headers = self.server.request("GET", path)
            self.assertEqual(status, 200, path)
            self.assertIn(mime, headers["Content-Type"])
        # Every resource the page loaded came from the server itself.
        urls = self.driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        self.assertTrue(urls)
        for url in urls:
            self.assertTrue(url.startswith(self.server.url + "/"), url)
        self.wait.until(lambda d: self.el("#model-name").text)  # /v1/models answered the page

    def test_streamed_answer_matches_the_api(self):
        self.open_settings()
        self.set_field("system-prompt", "You are a helpful assistant.")
        self.set_field("temperature", 0)
        self.set_field("max-tokens", 40)
        self.send("Hello, who are you?")
        self.wait.until(lambda d: self.state() in ("done", "error"))
        answer = self.last_answer()
        self.assertEqual(answer.get_attribute("data-state"), "done", answer.text)
        reasoning, content = self.text_of(answer, ".reasoning-text"), self.text_of(answer, ".content")
        # The same request, whole, through the API.
        status, whole, _ = self.server.request("POST", "/v1/chat/completions", {
            "messages": [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hello, who are you?"}],
            "temperature": 0, "max_tokens": 40, "chat_template_kwargs": {"enable_thinking": True}})
        self.assertEqual(status, 200, whole)
        message = whole["choices"][0]["message"]
        self.assertEqual(reasoning, message.get("reasoning_content", ""))
        self.assertEqual(content, message["content"] or "")
        self.assertTrue(reasoning or content)
        self.assertIn("finish: " + whole["choices"][0]["finish_reason"], self.text_of(answer, ".note"))
        # Reasoning sits in a collapsible block, closed by default.
        details = answer.find_element(By.CSS_SELECTOR, "details.reasoning")
        if reasoning:
            self.assertIsNone(details.get_attribute("open"))
            details.find_element(By.TAG_NAME, "summary").click()
            self.assertIsNotNone(details.get_attribute("open"))
        # A second turn carries the first (the page keeps the history).
        self.send("And then?")
        self.wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant")) == 2 and self.state() in ("done", "error"))
        self.assertEqual(self.state(), "done")
        self.driver.save_screenshot(os.path.join(OUT, "chat_page.png"))
        # New chat empties the conversation.
        self.el("#new-chat").click()
        self.assertEqual(self.driver.find_elements(By.CSS_SELECTOR, ".msg"), [])

    def test_stop_ends_a_long_answer(self):
        before = self.server.metrics()["qwenrt_generation_tokens_total"]
        self.open_settings()
        self.set_field("max-tokens", 8000)
        # The answer must outlast the click whatever the model would say (the demo model no longer
        # loops on to max_tokens): the page's request gets the server's ignore_eos, not a page
        # setting, on its way out, so the real stream runs on until the page stops it.
        self.driver.execute_script("""
            const realFetch = window.fetch;
            window.fetch = (url, init) => {
              if (!url.includes('chat/completions')) return realFetch(url, init);
              const body = JSON.parse(init.body);
              body.ignore_eos = true;
              return realFetch(url, {...init, body: JSON.stringify(body)});
            };""")
        self.send("What does John 3:16 say?")
        # Stop once the answer is streaming.
        self.wait.until(lambda d: self.text_of(self.last_answer(), ".reasoning-text") or self.text_of(self.last_answer(), ".content"))
        self.assertTrue(self.el("#stop").is_displayed())
        self.el("#stop").click()
        self.wait.until(lambda d: self.state() == "stopped")
        self.assertFalse(self.el("#stop").is_displayed())
        self.assertTrue(self.el("#send").is_enabled())
        # The server saw the client leave and freed the sequence, well before 8000 tokens.
        m = self.server.wait_idle()
        self.assertEqual(m["qwenrt_requests_running"], 0)
        self.assertLess(m["qwenrt_generation_tokens_total"] - before, 6000)
        self.driver.save_screenshot(os.path.join(OUT, "chat_page_stopped.png"))

    def test_tool_calls_are_shown(self):
        # The demo model does not call tools; the page gets a canned stream of the server's wire
        # format (tool-call deltas as /v1/chat/completions sends them) in place of fetch.
        chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {"reasoning_content": "The user wants the weather."}, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                                      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                                "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
        sse = "".join("data: " + json.dumps(c) + "\n\n" for c in chunks) + "data: [DONE]\n\n"
        self.driver.execute_script("""
            const sse = arguments[0], realFetch = window.fetch;
            window.fetch = (url, init) => url.includes('chat/completions')
              ? Promise.resolve(new Response(sse, {status: 200, headers: {'Content-Type': 'text/event-stream'}}))
              : realFetch(url, init);""", sse)
        self.send("Weather in Paris?")
        self.wait.until(lambda d: self.state() == "done")
        calls = self.last_answer().find_elements(By.CSS_SELECTOR, ".tool-call")
        self.assertEqual([c.text for c in calls], ['tool call: get_weather({"city": "Paris"})'])
        self.assertIn("finish: tool_calls", self.text_of(self.last_answer(), ".note"))

    def test_errors_are_shown(self):
        self.open_settings()
        self.set_field("max-tokens", 10 ** 9)  # over the context: a 400 naming max_tokens
        self.send("Hi")
        self.wait.until(lambda d: self.state() == "error")
        self.assertIn("max_tokens", self.last_answer().find_element(By.CSS_SELECTOR, ".error").text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
