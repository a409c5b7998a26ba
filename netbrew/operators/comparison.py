"""Equal, Less, Greater and Where."""
