"""The report's sections, one module per section or pair of sections, in the page's order (``page.build_page``)."""
