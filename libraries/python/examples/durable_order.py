"""A durable three-step worker with raquel_pg: an order is reserved, cools
off (a sleep that holds no worker), waits for its payment event, is charged
and shipped. A retry, after an error or a killed worker, skips the steps
already done: each step's function runs once per job.

    RAQUEL_DSN="host=/tmp/raquel-dev port=54320 user=postgres dbname=raquel" python durable_order.py
    # then, for an order job {"order": 7}:  SELECT rq_emit('paid:7', '{"amount": 12}');

reserve, charge and ship stand for your own code."""

import os

import raquel_pg

COOL_OFF = float(os.environ.get("COOL_OFF", "60"))  # seconds


def reserve(order): return {"reservation": f"R-{order}"}
def charge(amount): return {"receipt": f"paid {amount}"}
def ship(stock, receipt): return {"shipped": stock["reservation"], **receipt}


# The handler code: 7 lines.
def order(job):
    stock = job.step("reserve", lambda: reserve(job.data["order"]))
    job.sleep("cool-off", COOL_OFF)
    paid = job.wait_event("payment", f"paid:{job.data['order']}")
    receipt = job.step("charge", lambda: charge(paid["amount"]))
    return job.step("ship", lambda: ship(stock, receipt))


if __name__ == "__main__":
    raquel_pg.Worker(os.environ["RAQUEL_DSN"], {"orders": order}).run()
