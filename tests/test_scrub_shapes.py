"""The ledger scrubber against a table of secret shapes (issue 16, item 9) and of ordinary text it must keep.

Each row is (text as it would be recorded, the secret in it). The secret must be gone and `***` in its
place; the non-secret parts named in `kept` must survive, so the command stays readable.
"""

from __future__ import annotations

import pytest

from ngrp_lib.artifacts.scrub import scrub

PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"

SHAPES = [
    # the eight shapes the hostile pass got through
    (f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----", PEM_BODY),
    (f"key: -----BEGIN RSA PRIVATE KEY-----\\n{PEM_BODY}\\n-----END RSA PRIVATE KEY----- done", PEM_BODY),
    (f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY} (log cut here)", PEM_BODY),
    ("curl -u alice:Pa55w0rdXYZ https://api.example.com/v1", "Pa55w0rdXYZ"),
    ("curl --user alice:Pa55w0rdXYZ https://api.example.com", "Pa55w0rdXYZ"),
    ("mysql -h db -u root -pS3cretSQLpw mydb", "S3cretSQLpw"),
    ("mysqldump --host db -pS3cretSQLpw --all-databases", "S3cretSQLpw"),
    ("sshpass -p 'S3cretSSHpw' ssh user@host", "S3cretSSHpw"),
    ("sshpass -p S3cretSSHpw rsync -a x host:y", "S3cretSSHpw"),
    ("charge with sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("STRIPE=rk_test_51HqLyjWDarjtT1zdp7dcAbC", "rk_test_51HqLyjWDarjtT1zdp7dcAbC"),
    ("maps?key=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    (
        "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCY",
    ),
    ("git clone https://abcdef0123456789abcdef@github.com/org/repo", "abcdef0123456789abcdef"),
    ("git push https://oauth2:glpat-abcdefghij1234567890@gitlab.com/x", "glpat-abcdefghij1234567890"),
    # token shapes
    ("OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLmN0pQ python run.py", "sk-proj-Ab3dEf6hIj9kLmN0pQ"),
    ("ANTHROPIC: sk-ant-api03-AbCdEfGhIjKlMnOp", "sk-ant-api03-AbCdEfGhIjKlMnOp"),
    ("run --api-key nvapi-QwErTy123456789_abc --n 3", "nvapi-QwErTy123456789_abc"),
    ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrSt", "hf_AbCdEfGhIjKlMnOpQrSt"),
    ("token ghp_0123456789abcdefABCDEF in use", "ghp_0123456789abcdefABCDEF"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijkl", "github_pat_11ABCDEFG0123456789_abcdefghijkl"),
    ("slack xoxb-123456789012-abcdefghijkl", "xoxb-123456789012-abcdefghijkl"),
    ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
    (
        "jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4",
        "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4",
    ),
    ("SG.abcdefghijklmnop1234.qrstuvwxyzABCDEF5678", "SG.abcdefghijklmnop1234.qrstuvwxyzABCDEF5678"),
    ("twine upload -p pypi-AgEIcHlwaS5vcmcCJDEy", "pypi-AgEIcHlwaS5vcmcCJDEy"),
    (
        "//registry/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    ("DATABRICKS dapi0123456789abcdef0123456789abcdef", "dapi0123456789abcdef0123456789abcdef"),
    ("bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq", "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"),
    ("post to https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX", "T000/B000/XXXXsecretXXXX"),
    # names that say "secret"
    ("export DB_PASSWORD='s3cr3tv4lue'; run", "s3cr3tv4lue"),
    ("PGPASSWORD=s3cr3tv4lue psql -h db", "s3cr3tv4lue"),
    ("run --token=tok-9f8e7d6c5b", "tok-9f8e7d6c5b"),
    ("++policy.generation.api_key=tok-9f8e7d6c5b", "tok-9f8e7d6c5b"),
    ('{"client_secret": "s3cr3tv4lue"}', "s3cr3tv4lue"),
    ("WANDB_API_KEY=s3cr3tv4lue\tNEXT=1", "s3cr3tv4lue"),
    ("DefaultEndpointsProtocol=https;AccountName=x;AccountKey=abc123XYZsecret==;", "abc123XYZsecret=="),
    ("X-Api-Key: abc123XYZsecret", "abc123XYZsecret"),
    ("huggingface-cli login --token hfsecretvalue123", "hfsecretvalue123"),
    ("api-key 'quoted s3cret value'", "quoted s3cret value"),
    # HTTP authorization and URLs with credentials
    ('curl -H "Authorization: Bearer BearerTok3nValue" x', "BearerTok3nValue"),
    ("curl -H 'Authorization: token 9f8e7d6c5b4a'", "9f8e7d6c5b4a"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("curl https://alice:hunter2pass@host:8000/v1/models", "hunter2pass"),
    ("redis://:r3d1sPassw0rd@cache:6379/0", "r3d1sPassw0rd"),
    ("HTTPS_PROXY=http://bob:pr0xyPass@proxy:3128", "pr0xyPass"),
    # tool options
    ("docker login -u bob -p D0ckerHubPw registry.io", "D0ckerHubPw"),
    ("openssl rsa -in k.pem -passin pass:0penSSLpw -out k2.pem", "0penSSLpw"),
    ("wandb login 0123456789abcdef0123456789abcdef01234567", "0123456789abcdef0123456789abcdef01234567"),
]


def test_the_table_is_large_enough():
    assert len(SHAPES) >= 40


@pytest.mark.parametrize(("text", "secret"), SHAPES, ids=[s[1][:20] for s in SHAPES])
def test_secret_shape_is_scrubbed(text, secret):
    cleaned = scrub(text)
    assert secret not in cleaned, cleaned
    assert "***" in cleaned
    assert scrub(cleaned) == cleaned  # idempotent


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "curl -u alice:Pa55w0rdXYZ https://api.example.com/v1",
            ["curl -u alice:", "https://api.example.com/v1"],
        ),
        ("mysql -h db -u root -pS3cretSQLpw mydb", ["mysql -h db -u root -p", "mydb"]),
        (
            "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG",
            ["aws configure set aws_secret_access_key"],
        ),
        (
            "git clone https://abcdef0123456789abcdef@github.com/org/repo",
            ["git clone https://", "@github.com/org/repo"],
        ),
        (
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY----- and then",
            ["and then", "BEGIN PRIVATE KEY"],
        ),
    ],
)
def test_the_rest_of_the_text_stays_readable(text, kept):
    cleaned = scrub(text)
    for part in kept:
        assert part in cleaned, cleaned


@pytest.mark.parametrize(
    "text",
    [
        "python train.py --max-tokens 512 max_new_tokens=64 --metric-key overall.mean_reward",
        "sort_key=task tokenizer=qwen --seed 3 http://localhost:8000/v1",
        "the password policy is unchanged",
        "ngrp stats p.jsonl --pass-threshold 0.5 --answer-key extracted_answer",
        "shorter token budget, basic reward shaping, Bearer of bad news",
        "mkdir -p out && ssh -p 2222 host",
        "git clone ssh://git@github.com/org/repo.git",
        "git clone https://github.com/org/repo",
        "psql -U postgres -h db mydb",
        "python -u train.py --num-tokens 5 --max_tokens 7",
        "docker run -p 8080:80 image",
        "ngrp ledger record --campaign dapo --log run.log --description 'try a longer prompt'",
        "gsm8k accuracy 0.71 on 1319 tasks, pass@8 0.93",
    ],
)
def test_ordinary_text_is_kept(text):
    assert scrub(text) == text
