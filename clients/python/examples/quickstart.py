"""Quickstart: create a machine, save a screenshot, run a command, delete the machine.

    COMPUTER_BASE_URL=http://127.0.0.1:8080 COMPUTER_API_KEY=sk_... python3 examples/quickstart.py
"""
from computer import Computer

with Computer.from_env() as cx:  # COMPUTER_API_KEY / COMPUTER_BASE_URL, else `computer login`'s file
    machine = cx.create_machine({"name": "quickstart"})
    try:
        png = machine.screenshot()  # 503 while the desktop boots: the SDK retries with backoff
        with open("screenshot.png", "wb") as f:
            f.write(png)
        result = machine.exec(["uname", "-sm"])
        print(result["stdout"], end="")
    finally:
        machine.delete()
