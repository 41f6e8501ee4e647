"""DE-COP against a real vLLM engine: the demo model (an instruct model with a chat template) served by `make
serve-demo`, its tokens spelt as ids (`--return-tokens-as-token-ids`), read back through the model's own tokenizer.

The quiz's options here are other passages of the same play, not paraphrases (no paraphraser runs offline): this
checks what only a real engine shows — how it lists the letters and their reading through the tokenizer — not DE-COP's power, which a 135 M-parameter model cannot show (it answers near chance)."""
from __future__ import annotations

import json
import math

import pytest
from tokenizers import Tokenizer

from mia_core.blackbox.decop import DecopSettings, decop_book
from mia_core.blackbox.decop_passages import QuizBook, QuizPassage
from mia_core.blackbox.decop_stats import letter_means
from mia_core.blackbox.gl_bound import file_sha256
from mia_core.inputs.demo_sources import play_files, play_text
from mia_core.model.chat.chat_model import connect_chat
from mia_core.model.demo_weights import demo_folder

pytestmark = [pytest.mark.integration, pytest.mark.served]

WORDS = 30


def quiz(play_id: str) -> QuizBook:
    """One question: a passage of the play and three later passages of it, each `WORDS` words."""
    title, text = play_text(play_id)
    words = text.split()[200:]
    parts = [" ".join(words[i * 3 * WORDS:i * 3 * WORDS + WORDS]) for i in range(4)]
    return QuizBook(title, "William Shakespeare", (QuizPassage(parts[0], (parts[1], parts[2], parts[3])),),
                    "other passages of the play (a pipeline check, not paraphrases)")


def test_decop_reads_the_letters_a_real_engine_lists_as_token_ids(vllm_demo):
    tokenizer_path = demo_folder() / "tokenizer.json"
    model = connect_chat(f"{vllm_demo.url}/v1?api=chat&model=demo")
    assert model.tier.name == "GL" and model.tier.token_ids
    book = quiz(sorted(play_files())[0])
    settings = DecopSettings(tokenizer=str(tokenizer_path), tokenizer_sha256=file_sha256(tokenizer_path))
    exchanges = []
    # the procedure itself, each question sent once (the runner, its record and verify are tested on the loopback API)
    result = decop_book(book.to_json(), "demo", "chat", settings,
                        lambda step, body: model.client.send(body, exchanges.append, token_bound=4096))
    assert len(exchanges) == 24 and all(e.status == 200 for e in exchanges)
    # independently: decode each answer's listed ids with the tokenizers library, sum each letter's spellings
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    found = 0
    for exchange, row in zip(exchanges, result["questions"]):
        first = json.loads(exchange.response)["choices"][0]["logprobs"]["content"][0]
        listed = {t["token"]: t["logprob"] for t in first["top_logprobs"]} | {first["token"]: first["logprob"]}
        text = {k: tokenizer.decode([int(k.split(":")[1])]).strip() for k in listed}
        letters = {c: [v for k, v in listed.items() if text[k] == c] for c in "ABCD"}
        floor = min(listed.values())
        logs = [math.log(sum(math.exp(v) for v in letters[c])) if letters[c] else floor for c in "ABCD"]
        total = sum(math.exp(v) for v in logs)
        assert row[3] == pytest.approx([math.exp(v) / total for v in logs], abs=1e-9)
        assert row[5] == "".join(c for c in "ABCD" if not letters[c])
        found += sum(bool(letters[c]) for c in "ABCD")
    assert found >= 24 * 3  # the engine lists most letters among its top 20: they are read, not flagged
    mu = letter_means([result])
    assert sum(mu) == pytest.approx(1.0)
    print(f"demo model: letter means {mu}, raw accuracy {result['accuracy_raw']:.3f}")
