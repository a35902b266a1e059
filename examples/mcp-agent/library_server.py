"""A library's catalogue as an MCP server (the Python `mcp` SDK 2.x: `pip install mcp`):
three tools a desk agent uses to answer "can I borrow X, and when?". The bench beside it
(promptgauge.yaml) offers them to the model; promptgauge starts this once a run and forwards
each call."""

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("library")

BOOKS = {
    "dune": ("B-101", "Dune", "Frank Herbert"),
    "emma": ("B-102", "Emma", "Jane Austen"),
    "ubik": ("B-103", "Ubik", "Philip K. Dick"),
    "kindred": ("B-104", "Kindred", "Octavia E. Butler"),
    "solaris": ("B-105", "Solaris", "Stanisław Lem"),
    "beloved": ("B-106", "Beloved", "Toni Morrison"),
}
# Copies on the shelf, or the day the first one comes back.
SHELF = {
    "B-101": "2026-12-14",
    "B-102": "on the shelf",
    "B-103": "2026-12-09",
    "B-104": "on the shelf",
    "B-105": "2026-12-21",
    "B-106": "2026-12-11",
}


@server.tool()
def search_catalogue(title: str) -> str:
    """Finds a book by its title; returns its id, title and author."""
    book = BOOKS.get(title.strip().lower())
    if book is None:
        raise ToolError(f"no book titled {title!r} in the catalogue")
    return f"{book[0]}: {book[1]} by {book[2]}"


@server.tool()
def availability(book_id: str) -> str:
    """Whether a copy of the book (by its id) is on the shelf, or when one comes back."""
    when = SHELF.get(book_id)
    if when is None:
        raise ToolError(f"unknown book id {book_id!r}: search the catalogue first")
    return "a copy is on the shelf" if when == "on the shelf" else f"all copies are out; the first is due back on {when}"


@server.tool()
def opening_hours(day: str = "today") -> str:
    """When the library is open."""
    return "open Monday to Saturday, 9:00 to 19:00"


if __name__ == "__main__":
    server.run()
